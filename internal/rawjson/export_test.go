package rawjson

// Canonical returns the canonical form of raw (see Reencode) the way the
// server's callers reach it: IsCanonical, then a Canonicalizer, then
// Reencode for what the Canonicalizer declines. The result may share raw's
// memory.
func Canonical(raw []byte) []byte {
	if IsCanonical(raw) {
		return raw
	}
	var c Canonicalizer
	if out, ok := c.Append(nil, raw); ok {
		return out
	}
	return Reencode(raw)
}
