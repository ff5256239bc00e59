package completion

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"testing"
)

// keyPattern is the form of a key, legacy or routed, stated on its own.
var keyPattern = regexp.MustCompile(`^ck_[A-Za-z0-9_-]{43}(\.[A-Za-z0-9._~:@+=-]{1,256})?$`)

// testSecret returns a fixed secret of SecretSize bytes starting with seed.
func testSecret(t *testing.T, seed byte) Secret {
	t.Helper()
	s := make(Secret, SecretSize)
	for i := range s {
		s[i] = seed + byte(i)
	}
	return s
}

func testKeyring(t *testing.T, seed byte) *Keyring {
	t.Helper()
	k, err := NewKeyring(testSecret(t, seed))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestKeyDeterministic(t *testing.T) {
	t.Parallel()
	a, b, other := testKeyring(t, 1), testKeyring(t, 1), testKeyring(t, 2)
	base := a.Key("s1", "t1", "c1")
	if got := b.Key("s1", "t1", "c1"); got != base {
		t.Errorf("same secret, same ids: %q and %q differ", base, got)
	}
	if got := a.Key("s1", "t1", "c1"); got != base {
		t.Errorf("same keyring, same ids: %q and %q differ", base, got)
	}
	if got := other.Key("s1", "t1", "c1"); got == base {
		t.Error("a different secret gives the same key")
	}

	// Every pair of id triples here must get distinct keys, including those
	// that concatenate to the same text.
	triples := [][3]string{
		{"s1", "t1", "c1"}, {"s2", "t1", "c1"}, {"s1", "t2", "c1"}, {"s1", "t1", "c2"},
		{"ab", "c", "d"}, {"a", "bc", "d"}, {"a", "b", "cd"}, {"abc", "", "d"}, {"", "abc", "d"},
		{"", "", "abcd"}, {"", "", ""}, {"a\x00", "b", "c"}, {"a", "\x00b", "c"},
		{"\x00\x00\x00\x00\x00\x00\x00\x01a", "", ""}, {"", "a", ""},
	}
	seen := map[Key][3]string{}
	for _, tr := range triples {
		k := a.Key(tr[0], tr[1], tr[2])
		if prev, dup := seen[k]; dup {
			t.Errorf("ids %q and %q get the same key", prev, tr)
		}
		seen[k] = tr
	}
}

func TestKeyFormat(t *testing.T) {
	t.Parallel()
	k := testKeyring(t, 7)
	for i := range 200 {
		key := k.Key("session", "turn", fmt.Sprint("call-", i))
		if !keyPattern.MatchString(string(key)) {
			t.Fatalf("key %q does not match %v", key, keyPattern)
		}
		raw, err := base64.RawURLEncoding.Strict().DecodeString(string(key)[len(KeyPrefix):KeyLen])
		if err != nil || len(raw)*8 < 256 {
			t.Fatalf("key %q carries %d bits (%v), want 256", key, len(raw)*8, err)
		}
		if got, err := ParseKey(string(key)); err != nil || got != key {
			t.Fatalf("ParseKey(%q) = %q, %v", key, got, err)
		}
	}
}

func TestParseKey(t *testing.T) {
	t.Parallel()
	valid := string(testKeyring(t, 3).LegacyKey("s", "t", "c"))
	body := valid[len(KeyPrefix):]
	canonical := "ck_" + strings.Repeat("A", 42) + "E" // E = 0b000100: low bits clear
	tests := []struct {
		name string
		in   string
		ok   bool
	}{
		{"issued key", string(testKeyring(t, 3).Key("s", "t", "c")), true},
		{"all A", "ck_" + strings.Repeat("A", 43), true},
		{"letters", "ck_ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnop0", true},
		{"digits and symbols", "ck_qrstuvwxyz0123456789-_" + strings.Repeat("A", 20) + "Q", true},
		{"canonical last char", canonical, true},
		{"last char with stray bits", "ck_" + strings.Repeat("A", 42) + "B", false},
		{"empty", "", false},
		{"prefix only", "ck_", false},
		{"wrong prefix", "ab_" + body, false},
		{"upper-case prefix", "CK_" + body, false},
		{"no prefix", body + "abc", false},
		{"short", valid[:len(valid)-1], false},
		{"long", valid + "A", false},
		{"padding", valid[:len(valid)-1] + "=", false},
		{"padding appended", valid + "=", false},
		{"standard alphabet plus", "ck_" + strings.Repeat("+", 42) + "A", false},
		{"standard alphabet slash", "ck_" + strings.Repeat("/", 42) + "A", false},
		{"space", "ck_" + strings.Repeat("A", 21) + " " + strings.Repeat("A", 21), false},
		{"newline inside", "ck_" + strings.Repeat("A", 21) + "\n" + strings.Repeat("A", 21), false},
		{"non-ASCII", "ck_" + strings.Repeat("A", 41) + "é", false},
		{"NUL", "ck_" + strings.Repeat("A", 42) + "\x00", false},
		{"huge", "ck_" + strings.Repeat("A", 1<<20), false},
		{"legacy key", valid, true},
		{"routed, every route character", canonical + ".az-AZ_09.~:@+=", true},
		{"routed, longest route", canonical + "." + strings.Repeat("s", MaxRouteLen), true},
		{"routed, route too long", canonical + "." + strings.Repeat("s", MaxRouteLen+1), false},
		{"routed, empty route", canonical + ".", false},
		{"routed, no separator", canonical + "s", false},
		{"routed, other separator", canonical + "_s", false},
		{"routed, slash in route", canonical + ".a/b", false},
		{"routed, percent in route", canonical + ".a%2Fb", false},
		{"routed, space in route", canonical + ".a b", false},
		{"routed, non-ASCII route", canonical + ".é", false},
		{"routed, stray bits", "ck_" + strings.Repeat("A", 42) + "B.s", false},
		{"routed, short MAC", valid[:KeyLen-1] + ".s", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := ParseKey(tt.in)
			if tt.ok {
				if err != nil || string(got) != tt.in {
					t.Fatalf("ParseKey = %q, %v; want the key", got, err)
				}
				return
			}
			if !errors.Is(err, ErrMalformedKey) || got != "" {
				t.Fatalf("ParseKey = %q, %v; want ErrMalformedKey", got, err)
			}
			if len(tt.in) > 8 && strings.Contains(err.Error(), tt.in) {
				t.Errorf("error %q repeats the input", err)
			}
		})
	}
}

func TestKeyringVerify(t *testing.T) {
	t.Parallel()
	k := testKeyring(t, 5)
	key := k.Key("s", "t", "c")
	if !k.Verify(key, "s", "t", "c") {
		t.Fatal("Verify rejects the issued key")
	}
	if !testKeyring(t, 5).Verify(key, "s", "t", "c") {
		t.Error("Verify on a keyring with the same secret rejects the key")
	}
	if testKeyring(t, 6).Verify(key, "s", "t", "c") {
		t.Error("Verify on a keyring with another secret accepts the key")
	}
	for _, ids := range [][3]string{{"s", "t", "d"}, {"s", "u", "c"}, {"r", "t", "c"}, {"st", "", "c"}} {
		if k.Verify(key, ids[0], ids[1], ids[2]) {
			t.Errorf("Verify accepts the key for ids %q", ids)
		}
	}
	// Flip every character, one at a time, to another alphabet character.
	for i := range len(key) {
		b := []byte(key)
		if b[i] == 'A' {
			b[i] = 'B'
		} else {
			b[i] = 'A'
		}
		tampered := Key(b)
		if k.Verify(tampered, "s", "t", "c") {
			t.Errorf("Verify accepts the key with byte %d changed: %q", i, tampered)
		}
		if tampered.Hash() == key.Hash() {
			t.Errorf("tampered key at byte %d has the same hash", i)
		}
	}
	for _, bad := range []Key{"", key[:len(key)-1], key + "A", Key(strings.ToUpper(string(key)))} {
		if k.Verify(bad, "s", "t", "c") {
			t.Errorf("Verify accepts %q", bad)
		}
	}
}

func TestHash(t *testing.T) {
	t.Parallel()
	k := testKeyring(t, 9)
	hexDigits := regexp.MustCompile(`^[0-9a-f]{8}$`)
	for i := range 50 {
		key := k.Key("s", "t", fmt.Sprint(i))
		h := key.Hash()
		if h != HashOf(string(key)) {
			t.Fatalf("Key.Hash and HashOf disagree on %q", key)
		}
		if !h.Equal(HashOf(string(key))) {
			t.Fatalf("Hash.Equal rejects an equal hash")
		}
		if fp := h.Fingerprint(); !hexDigits.MatchString(fp) || fp != key.Fingerprint() {
			t.Fatalf("fingerprint %q (key %q)", fp, key.Fingerprint())
		}
		if strings.Contains(string(key), h.Fingerprint()) {
			t.Fatalf("fingerprint %q appears in the key", h.Fingerprint())
		}
	}
	if HashOf("a").Equal(HashOf("b")) {
		t.Error("Equal holds for different hashes")
	}
	// HashOf takes any string, malformed keys included.
	if HashOf("") == HashOf("ck_") {
		t.Error("distinct strings share a hash")
	}
}

func TestNewSecret(t *testing.T) {
	t.Parallel()
	a, err := NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	if len(a) != SecretSize || len(b) != SecretSize {
		t.Fatalf("sizes %d, %d; want %d", len(a), len(b), SecretSize)
	}
	if bytes.Equal(a, b) {
		t.Fatal("two new secrets are equal")
	}
	if _, err := NewKeyring(a); err != nil {
		t.Fatal(err)
	}
}

func TestParseSecret(t *testing.T) {
	t.Parallel()
	key := bytes.Repeat([]byte{0xfb, 0xff, 0x3e}, 11) // 33 bytes; encodings differ between alphabets
	raw := "correct horse battery staple, and then some"
	tests := []struct {
		name string
		in   string
		want []byte // nil: error
	}{
		{"std padded", base64.StdEncoding.EncodeToString(key[:32]), key[:32]},
		{"std unpadded", base64.RawStdEncoding.EncodeToString(key[:32]), key[:32]},
		{"url padded", base64.URLEncoding.EncodeToString(key[:32]), key[:32]},
		{"url unpadded", base64.RawURLEncoding.EncodeToString(key[:32]), key[:32]},
		{"33 bytes", base64.StdEncoding.EncodeToString(key), key},
		{"String form", testSecret(t, 4).String(), testSecret(t, 4)},
		{"surrounding white space", "  " + base64.StdEncoding.EncodeToString(key[:32]) + "\n", key[:32]},
		{"hex of 32 bytes reads as base64", strings.Repeat("0123456789abcdef", 4), mustDecode(t, strings.Repeat("0123456789abcdef", 4))},
		{"raw string", raw, []byte(raw)},
		{"raw string of exactly 32 bytes", strings.Repeat("x!", 16), []byte(strings.Repeat("x!", 16))},
		{"base64 of 24 bytes falls back to raw", base64.StdEncoding.EncodeToString(key[:24]), []byte(base64.StdEncoding.EncodeToString(key[:24]))},
		{"empty", "", nil},
		{"white space only", " \t\n", nil},
		{"short raw", "too short a secret", nil},
		{"raw of 31 bytes", strings.Repeat("x!", 15) + "x", nil},
		{"base64 of 16 bytes", base64.StdEncoding.EncodeToString(key[:16]), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := ParseSecret(tt.in)
			if tt.want == nil {
				if !errors.Is(err, ErrInvalidSecret) || got != nil {
					t.Fatalf("ParseSecret = %d bytes, %v; want ErrInvalidSecret", len(got), err)
				}
				if trimmed := strings.TrimSpace(tt.in); trimmed != "" && strings.Contains(err.Error(), trimmed) {
					t.Errorf("error %q repeats the secret", err)
				}
				return
			}
			if err != nil || !bytes.Equal(got, tt.want) {
				t.Fatalf("ParseSecret = %x, %v; want %x", []byte(got), err, tt.want)
			}
			again, err := ParseSecret(got.String())
			if err != nil || !bytes.Equal(again, got) {
				t.Fatalf("ParseSecret(String()) = %x, %v; want %x", []byte(again), err, []byte(got))
			}
		})
	}
}

func mustDecode(t *testing.T, s string) []byte {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestNewKeyring(t *testing.T) {
	t.Parallel()
	for _, n := range []int{0, 1, SecretSize - 1} {
		if k, err := NewKeyring(make(Secret, n)); !errors.Is(err, ErrInvalidSecret) || k != nil {
			t.Errorf("NewKeyring(%d bytes) = %v, %v; want ErrInvalidSecret", n, k, err)
		}
	}
	s := testSecret(t, 1)
	k, err := NewKeyring(s)
	if err != nil {
		t.Fatal(err)
	}
	before := k.Key("s", "t", "c")
	s[0] ^= 0xff
	if after := k.Key("s", "t", "c"); after != before {
		t.Error("changing the secret after NewKeyring changes the keys")
	}
	long := append(testSecret(t, 1), 1, 2, 3)
	if _, err := NewKeyring(long); err != nil {
		t.Errorf("NewKeyring(%d bytes): %v", len(long), err)
	}
}

// TestRedaction checks that secrets and keys do not leak through fmt,
// JSON or slog.
func TestRedaction(t *testing.T) {
	t.Parallel()
	secret := testSecret(t, 0x41) // printable bytes, to catch %s leaks
	key := testKeyring(t, 1).Key("s", "t", "c")
	leaks := []string{secret.String(), string(secret), fmt.Sprintf("%x", []byte(secret)),
		base64.StdEncoding.EncodeToString(secret), string(key), string(key)[len(KeyPrefix):]}

	var out bytes.Buffer
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%d"} {
		fmt.Fprintf(&out, verb+" "+verb+"\n", secret, key)
	}
	fmt.Fprintln(&out, secret, key, []Secret{secret}, []Key{key}, struct {
		S Secret
		K Key
	}{secret, key})
	j, err := json.Marshal(struct{ S Secret }{secret})
	if err != nil {
		t.Fatal(err)
	}
	out.Write(j)
	slog.New(slog.NewTextHandler(&out, nil)).Info("m", "secret", secret, "key", key)
	slog.New(slog.NewJSONHandler(&out, nil)).Info("m", "secret", secret, "key", key)

	for _, leak := range leaks {
		if strings.Contains(out.String(), leak) {
			t.Errorf("output contains %q:\n%s", leak, out.String())
		}
	}
	if !strings.Contains(out.String(), key.Fingerprint()) {
		t.Errorf("formatted key does not show its fingerprint:\n%s", out.String())
	}
}

// A routed key names its session; the MAC binds it, so a key whose route
// is changed is no key of any call, in that session or another.
func TestKeyRoute(t *testing.T) {
	t.Parallel()
	k := testKeyring(t, 11)
	key := k.Key("ses_a", "t", "c")
	if sid, ok := Route(string(key)); !ok || sid != "ses_a" {
		t.Fatalf("Route(%q) = %q, %v; want ses_a", key, sid, ok)
	}
	legacy := k.LegacyKey("ses_a", "t", "c")
	if sid, ok := Route(string(legacy)); ok {
		t.Errorf("Route of a legacy key = %q, true", sid)
	}
	if len(legacy) != KeyLen || strings.HasPrefix(string(key), string(legacy)) {
		t.Errorf("legacy key %q: length %d, or the routed key %q starts with it", legacy, len(legacy), key)
	}
	mac := string(key)[:KeyLen]
	tests := []struct {
		name, forged string
	}{
		{"other session", mac + ".ses_b"},
		{"route prefix", mac + ".ses_"},
		{"route extended", mac + ".ses_ab"},
		{"route case", mac + ".SES_A"},
		{"legacy MAC with the route", string(legacy) + ".ses_a"},
		{"MAC of another session's call", string(k.Key("ses_b", "t", "c"))[:KeyLen] + ".ses_a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			forged, err := ParseKey(tt.forged)
			if err != nil {
				t.Fatalf("ParseKey(%q): %v; a forged route is well-formed", tt.forged, err)
			}
			sid, _ := Route(tt.forged)
			for _, ids := range [][3]string{{"ses_a", "t", "c"}, {sid, "t", "c"}} {
				if k.Verify(forged, ids[0], ids[1], ids[2]) {
					t.Errorf("Verify accepts %q for %q", forged, ids)
				}
				if forged.Hash() == k.Key(ids[0], ids[1], ids[2]).Hash() {
					t.Errorf("%q hashes as the key of %q", forged, ids)
				}
			}
		})
	}
	if got := k.KeyOf(legacy.Hash(), "ses_a", "t", "c"); got != legacy {
		t.Errorf("KeyOf a legacy hash = %q, want the legacy key", got)
	}
	if got := k.KeyOf(key.Hash(), "ses_a", "t", "c"); got != key {
		t.Errorf("KeyOf a routed hash = %q, want the routed key", got)
	}
	if !k.Verify(legacy, "ses_a", "t", "c") {
		t.Error("Verify rejects the legacy key")
	}
}
