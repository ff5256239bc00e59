// Package layering holds, as a test, the dependency rule of the pure
// packages: completion and internal/rawjson import nothing but the
// standard library, in their tests too; budget nothing else but
// internal/rawjson; dispatch nothing else in its code; the client only the
// wire types. It has no code of its own.
package layering
