// Package layering holds, as a test, the dependency rule of the packages
// that import nothing but the standard library: budget and completion, in
// their tests too, and dispatch. It has no code of its own.
package layering
