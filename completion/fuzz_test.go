package completion

import (
	"encoding/base64"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// FuzzParseKey holds ParseKey to an independent statement of the key form,
// and HashOf to Key.Hash.
func FuzzParseKey(f *testing.F) {
	k, err := NewKeyring(make(Secret, SecretSize))
	if err != nil {
		f.Fatal(err)
	}
	valid := string(k.Key("s", "t", "c"))
	for _, s := range []string{
		valid, "", "ck_", "ck_" + strings.Repeat("A", 43), "ck_" + strings.Repeat("A", 42) + "B",
		valid + "=", valid[:45] + "=", "CK_" + valid[3:], "ck_" + strings.Repeat("/", 43),
		"ck_" + strings.Repeat("A", 21) + "\n" + strings.Repeat("A", 21), "ck_" + strings.Repeat("é", 21) + "A",
		string(k.LegacyKey("s", "t", "c")), valid[:KeyLen] + ".", valid[:KeyLen] + "/s", valid[:KeyLen] + ".s.t",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		key, err := ParseKey(s)
		mac, _, _ := strings.Cut(strings.TrimPrefix(s, KeyPrefix), ".")
		raw, decErr := base64.RawURLEncoding.Strict().DecodeString(mac)
		want := keyPattern.MatchString(s) && decErr == nil && len(raw) == 32
		switch {
		case want && (err != nil || string(key) != s):
			t.Fatalf("ParseKey(%q) = %q, %v; want the key", s, key, err)
		case !want && (!errors.Is(err, ErrMalformedKey) || key != ""):
			t.Fatalf("ParseKey(%q) = %q, %v; want ErrMalformedKey", s, key, err)
		}
		if HashOf(s) != Key(s).Hash() {
			t.Fatalf("HashOf and Key.Hash disagree on %q", s)
		}
	})
}

// FuzzResolve checks that Resolve never panics, that every success keeps
// the invariants of Resolved, that every failure is an *OptionsError, and
// that defaults passing Validate resolve.
func FuzzResolve(f *testing.F) {
	f.Add(int64(1772366400), int64(123456789), "2h", "5m", "fail_turn", "ignore", "90s", "", "", "")
	f.Add(int64(0), int64(0), "", "", "", "", "", "", "", "")
	f.Add(int64(1772366400), int64(0), "720h", "", "", "", "2026-03-02T00:00:00Z", "1h", "error_as_result", "cancel_external_work")
	f.Add(int64(1772366400), int64(999), "-1s", "0", "x", "y", "2026-03-01T12:00:00.0000001+01:00", "1ns", "", "")
	f.Add(int64(253402300799), int64(0), "1h", "30m", "", "", "9999-12-31T23:59:59Z", "", "", "")
	f.Add(int64(1772366400), int64(0), "1e9h", "1.5.5s", "", "", "2026-13-01T00:00:00Z", "", "", "")
	f.Fuzz(func(t *testing.T, sec, nsec int64, d1, h1, t1, c1, d2, h2, t2, c2 string) {
		// Keep now where now+MaxDeadline is representable: years 0001–9999.
		const minSec, maxSec = -62135596800, 253402300799
		sec = minSec + int64(uint64(sec)%uint64(maxSec-minSec))
		now := time.Unix(sec, nsec%int64(time.Second))
		defaults := Options{d1, h1, OnTimeout(t1), OnCancel(c1)}
		override := Options{d2, h2, OnTimeout(t2), OnCancel(c2)}
		r, err := Resolve(now, defaults, override)
		if err != nil {
			var oe *OptionsError
			if !errors.As(err, &oe) || !errors.Is(err, ErrInvalidOptions) || r != (Resolved{}) {
				t.Fatalf("Resolve = %+v, %v; want an *OptionsError alone", r, err)
			}
		} else {
			checkResolved(t, now.UTC().Truncate(time.Microsecond), r)
			r2 := r.Heartbeat(now.Add(time.Duration(nsec)))
			if !r2.Deadline.Equal(r.Deadline) || r2.TimeoutAt().After(r.Deadline) {
				t.Fatalf("Heartbeat moved the deadline: %+v → %+v", r, r2)
			}
		}
		if defaults.Validate() == nil {
			if _, err := Resolve(now, defaults, Options{}); err != nil {
				t.Fatalf("defaults %+v pass Validate but not Resolve: %v", defaults, err)
			}
		}
	})
}

// FuzzVerify checks that Verify never panics, fails only with its three
// sentinels, and accepts only messages carrying their own signature.
func FuzzVerify(f *testing.F) {
	s, err := NewSigner(specSecret)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(specID, "1614265330", specSignature, []byte(specBody), int64(specTimestamp), int64(0))
	f.Add(specID, "1614265330", "v1,AAAA v1a,x "+specSignature, []byte(specBody), int64(specTimestamp+300), int64(0))
	f.Add("", "", "", []byte(nil), int64(0), int64(-1))
	f.Add("id", "-1", "v1,", []byte("x"), int64(0), int64(1))
	f.Add("id", "9223372036854775807", "v1,====", []byte("x"), int64(-9223372036854775808), int64(9223372036854775807))
	f.Add("a.b", "0", " , v1 ,, v1,,", []byte("."), int64(0), int64(0))
	f.Fuzz(func(t *testing.T, id, ts, sig string, body []byte, nowSec, tolerance int64) {
		now := time.Unix(nowSec, 0)
		h := mapHeader{HeaderID: id, HeaderTimestamp: ts, HeaderSignature: sig}
		err := s.Verify(h, body, now, time.Duration(tolerance))
		switch {
		case err == nil:
			sec, perr := strconv.ParseInt(ts, 10, 64)
			if perr != nil || !slices.Contains(strings.Fields(sig), s.Sign(id, time.Unix(sec, 0), body)) {
				t.Fatalf("Verify accepts id %q ts %q sig %q body %q", id, ts, sig, body)
			}
		case !errors.Is(err, ErrMissingSignature) && !errors.Is(err, ErrTimestampTolerance) && !errors.Is(err, ErrBadSignature):
			t.Fatalf("Verify = %v, not one of its sentinels", err)
		}
		// Whatever the id and body, a message signed now verifies.
		if id != "" {
			signed := mapHeader(s.Headers(id, now, body))
			if err := s.Verify(signed, body, now, time.Duration(tolerance)); err != nil && nowSec >= 0 {
				t.Fatalf("Verify of a signed message (id %q, body %q): %v", id, body, err)
			}
		}
	})
}

// FuzzParseSecret checks that ParseSecret never panics, keeps its length
// rule and never repeats a rejected secret.
func FuzzParseSecret(f *testing.F) {
	for _, s := range []string{
		"", " ", "short", strings.Repeat("A", 43), strings.Repeat("A", 44), strings.Repeat("-_", 22),
		strings.Repeat("0123456789abcdef", 4), "correct horse battery staple and more", strings.Repeat("A", 42) + "\n\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		s, err := ParseSecret(in)
		if err != nil {
			if !errors.Is(err, ErrInvalidSecret) || s != nil {
				t.Fatalf("ParseSecret = %d bytes, %v", len(s), err)
			}
			if trimmed := strings.TrimSpace(in); len(trimmed) > 8 && strings.Contains(err.Error(), trimmed) {
				t.Fatalf("error %q repeats the secret", err)
			}
			return
		}
		if len(s) < SecretSize {
			t.Fatalf("ParseSecret(%q) accepted %d bytes", in, len(s))
		}
		if again, err := ParseSecret(s.String()); err != nil || string(again) != string(s) {
			t.Fatalf("ParseSecret(String()) = %x, %v; want %x", []byte(again), err, []byte(s))
		}
	})
}

// FuzzNewSigner checks that NewSigner never panics and never repeats a
// rejected secret.
func FuzzNewSigner(f *testing.F) {
	for _, s := range []string{"", specSecret, "whsec_", "whsec_====", strings.TrimPrefix(specSecret, "whsec_"),
		"a raw signing secret of 32 bytes", "whsec_a raw signing secret of 32 bytes"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		s, err := NewSigner(in)
		if err != nil {
			if !errors.Is(err, ErrInvalidSecret) || s != nil {
				t.Fatalf("NewSigner = %v, %v", s, err)
			}
			if body := strings.TrimPrefix(strings.TrimSpace(in), SigningSecretPrefix); len(body) > 8 && strings.Contains(err.Error(), body) {
				t.Fatalf("error %q repeats the secret", err)
			}
			return
		}
		if len(s.key) < MinSigningKeySize {
			t.Fatalf("NewSigner(%q) accepted a key of %d bytes", in, len(s.key))
		}
	})
}
