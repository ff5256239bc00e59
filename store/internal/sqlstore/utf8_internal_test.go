package sqlstore

import (
	"testing"
	"unicode/utf8"
)

// FuzzValidUTF8: validUTF8 agrees with the standard library on strings and
// byte slices.
func FuzzValidUTF8(f *testing.F) {
	for _, s := range []string{"", "ascii", "é😀\u2028", "bad\xff\xfe", "\xed\xa0\x80", "\xc0\xaf", "\xef\xbf\xbd", "\xf4\x90\x80\x80", "trail\xe2\x82"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want := utf8.ValidString(s)
		if got := validUTF8(s); got != want {
			t.Fatalf("validUTF8(%q) = %v", s, got)
		}
		if got := validUTF8([]byte(s)); got != want {
			t.Fatalf("validUTF8([]byte(%q)) = %v", s, got)
		}
	})
}
