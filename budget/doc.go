// Package budget projects oversized tool outputs onto a size budget before
// they reach the model.
//
// A [Projector] holds a [Config]: a size cap (Limit, in bytes, or in tokens
// of 4 bytes each), a line cap (MaxLines) and a window (head, tail or both).
// An output within both caps is returned byte for byte. A larger output keeps
// a preview window and gets exactly one marker line such as
//
//	...8123 bytes truncated...
//
// between the head and the tail of the preview. The preview without the
// marker never exceeds either cap.
//
// # Zero caps
//
// [New] reads a zero Limit, MaxLines or HeadShare as "use the default". To
// mean a literal zero (a preview of nothing, say), pass [NoDefaults].
//
// # Lines
//
// The number of lines of a text is the number of '\n' plus one if the text is
// non-empty and does not end in '\n'; the empty text has no lines. A '\r'
// before a '\n' belongs to its line. A cut prefers whole lines: a head ends
// right after a '\n', a tail starts right after one. When no line boundary
// falls inside the window, the cut falls on a rune boundary instead; a UTF-8
// sequence is never split (invalid UTF-8 is tolerated, not repaired).
//
// # Which cap binds
//
// When the output exceeds the size cap, the marker counts dropped bytes
// (dropped tokens, ceil(bytes/4), in tokens mode) and [Result.Bound] is
// [BoundSize], even if the line cap is exceeded too. When only the line cap
// is exceeded, the marker counts dropped lines and the bound is [BoundLines].
//
// # Error windows
//
// [WindowErrors] keeps, within the same caps, the head, the tail and the
// dropped middle's error lines ([Config.Patterns], "file:line:col:"
// diagnostics), a marker in every gap; [Result.Kept] lists the spans kept.
// [Share] splits [Config.TurnLimit] among a turn's outputs in call order.
// ARCHITECTURE.md ("budget: error windows and the turn budget") says how.
//
// # JSON
//
// [Projector.ProjectJSON] keeps a JSON value valid and of the same shape: it
// shortens the longest strings (keeping their head and tail around a marker
// inside the string) and drops middle items of long arrays (in favour of one
// "...N items truncated..." element) until the compact serialization fits.
// Its output is compact JSON, so a projected value is one line; lines are
// counted on that output. Only when no such projection fits does it fall
// back to [Projector.Project] on the raw text; [Result.JSON] tells which
// happened. Memory stays bounded by the caps for long arrays, not by the
// input.
//
// # Streams
//
// [Projector.ProjectReader] and [Stream] project a body of unknown length in
// memory bounded by the caps, with the same result as [Projector.Project] on
// the same bytes.
//
// The package must import nothing but the standard library and
// internal/rawjson (its JSON scanner, itself standard-library-only); the
// internal/layering test holds both to it.
package budget
