package rawjson

// AppendCompact appends src as json.Compact writes it (and as json.Encoder
// writes a json.RawMessage with HTML escaping off): the value with every
// space, tab and line break outside its strings removed, strings byte for
// byte. It reports false, dst then unchanged, where src is not one JSON
// value or nests deeper than MaxDepth.
func AppendCompact(dst, src []byte) ([]byte, bool) {
	s := Scanner{B: src}
	i := s.Space(0)
	if i = s.Value(i, 0); i < 0 || s.Space(i) != len(src) {
		return dst, false
	}
	if !s.SawSpace {
		return append(dst, src...), true
	}
	return AppendCompactValid(dst, src), true
}

// AppendCompactValid appends src, which must be valid JSON text, without
// its insignificant whitespace.
func AppendCompactValid(dst, src []byte) []byte {
	start := 0
	for i := 0; i < len(src); i++ {
		switch src[i] {
		case ' ', '\t', '\n', '\r':
			dst = append(dst, src[start:i]...)
			start = i + 1
		case '"':
			for i++; i < len(src) && src[i] != '"'; i++ {
				if src[i] == '\\' {
					i++
				}
			}
		}
	}
	return append(dst, src[start:]...)
}
