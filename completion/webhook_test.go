package completion

import (
	"encoding/base64"
	"errors"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"
)

// The test vector of the Standard Webhooks specification.
const (
	specSecret    = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	specID        = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	specTimestamp = 1614265330
	specBody      = `{"test": 2432232314}`
	specSignature = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
)

var specTime = time.Unix(specTimestamp, 0)

func specSigner(t *testing.T) *Signer {
	t.Helper()
	s, err := NewSigner(specSecret)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// header builds request headers the way net/http holds them.
func header(id, ts, sig string) http.Header {
	h := http.Header{}
	for k, v := range map[string]string{HeaderID: id, HeaderTimestamp: ts, HeaderSignature: sig} {
		if v != "" {
			h.Set(k, v)
		}
	}
	return h
}

func TestSignerSpecVector(t *testing.T) {
	t.Parallel()
	s := specSigner(t)
	if got := s.Sign(specID, specTime, []byte(specBody)); got != specSignature {
		t.Fatalf("Sign = %s, want %s", got, specSignature)
	}
	h := header(specID, "1614265330", specSignature)
	if err := s.Verify(h, []byte(specBody), specTime.Add(time.Minute), 0); err != nil {
		t.Fatalf("Verify of the spec vector: %v", err)
	}
	// The same key given without the prefix, as the reference libraries
	// accept it.
	bare, err := NewSigner(strings.TrimPrefix(specSecret, SigningSecretPrefix))
	if err != nil {
		t.Fatal(err)
	}
	if got := bare.Sign(specID, specTime, []byte(specBody)); got != specSignature {
		t.Fatalf("Sign without the prefix = %s, want %s", got, specSignature)
	}
}

func TestSignerRoundTrip(t *testing.T) {
	t.Parallel()
	s := specSigner(t)
	ts := time.Date(2026, 3, 1, 12, 0, 0, 999_000_000, time.UTC) // sub-second part is dropped
	bodies := [][]byte{nil, {}, []byte(`{"result":"ok"}`), []byte("a.b.c\n\x00\xff")}
	for _, body := range bodies {
		hs := s.Headers(NewMessageID(), ts, body)
		if hs[HeaderTimestamp] != "1772366400" {
			t.Fatalf("timestamp header %q", hs[HeaderTimestamp])
		}
		h := http.Header{}
		for k, v := range hs {
			h.Set(k, v)
		}
		if err := s.Verify(h, body, ts, DefaultTolerance); err != nil {
			t.Fatalf("Verify of Headers output (body %q): %v", body, err)
		}
		if err := s.Verify(h, append(append([]byte(nil), body...), ' '), ts, DefaultTolerance); !errors.Is(err, ErrBadSignature) {
			t.Fatalf("Verify of an altered body = %v, want ErrBadSignature", err)
		}
	}
}

func TestSignerVerify(t *testing.T) {
	t.Parallel()
	s := specSigner(t)
	other, err := NewSigner("whsec_" + base64.StdEncoding.EncodeToString([]byte("another key of twenty-four+ bytes")))
	if err != nil {
		t.Fatal(err)
	}
	otherSig := other.Sign(specID, specTime, []byte(specBody))
	ts := "1614265330"
	tests := []struct {
		name      string
		h         http.Header
		body      string
		now       time.Time
		tolerance time.Duration
		want      error // nil: valid
	}{
		{"valid", header(specID, ts, specSignature), specBody, specTime, 0, nil},
		{"just within the default tolerance, old", header(specID, ts, specSignature), specBody, specTime.Add(DefaultTolerance), 0, nil},
		{"just within the default tolerance, ahead", header(specID, ts, specSignature), specBody, specTime.Add(-DefaultTolerance), 0, nil},
		{"too old", header(specID, ts, specSignature), specBody, specTime.Add(DefaultTolerance + time.Second), 0, ErrTimestampTolerance},
		{"too new", header(specID, ts, specSignature), specBody, specTime.Add(-DefaultTolerance - time.Second), 0, ErrTimestampTolerance},
		{"negative tolerance means default", header(specID, ts, specSignature), specBody, specTime.Add(DefaultTolerance + time.Second), -time.Second, ErrTimestampTolerance},
		{"custom tolerance, within", header(specID, ts, specSignature), specBody, specTime.Add(time.Hour), time.Hour, nil},
		{"custom tolerance, old", header(specID, ts, specSignature), specBody, specTime.Add(11 * time.Second), 10 * time.Second, ErrTimestampTolerance},
		{"custom tolerance, ahead", header(specID, ts, specSignature), specBody, specTime.Add(-11 * time.Second), 10 * time.Second, ErrTimestampTolerance},
		{"far future timestamp", header(specID, "9223372036854775807", specSignature), specBody, specTime, 0, ErrTimestampTolerance},
		{"zero timestamp", header(specID, "0", specSignature), specBody, specTime, 0, ErrTimestampTolerance},
		{"expired and unsigned: tolerance first", header(specID, "1", "v1,AAAA"), specBody, specTime, 0, ErrTimestampTolerance},
		{"tampered body", header(specID, ts, specSignature), specBody + " ", specTime, 0, ErrBadSignature},
		{"tampered id", header(specID+"x", ts, specSignature), specBody, specTime, 0, ErrBadSignature},
		{"tampered timestamp", header(specID, "1614265331", specSignature), specBody, specTime, 0, ErrBadSignature},
		{"other key", header(specID, ts, otherSig), specBody, specTime, 0, ErrBadSignature},
		{"rotation: new and old", header(specID, ts, otherSig+" "+specSignature), specBody, specTime, 0, nil},
		{"rotation: old and new", header(specID, ts, specSignature+" "+otherSig), specBody, specTime, 0, nil},
		{"extra spaces", header(specID, ts, "  "+otherSig+"   "+specSignature+" "), specBody, specTime, 0, nil},
		{"unknown versions skipped", header(specID, ts, "v1a,"+strings.TrimPrefix(specSignature, "v1,")+" v2,xyz "+specSignature), specBody, specTime, 0, nil},
		{"only an unknown version", header(specID, ts, "v1a,"+strings.TrimPrefix(specSignature, "v1,")), specBody, specTime, 0, ErrBadSignature},
		{"no version", header(specID, ts, strings.TrimPrefix(specSignature, "v1,")), specBody, specTime, 0, ErrBadSignature},
		{"bad base64", header(specID, ts, "v1,!!!notbase64!!!"), specBody, specTime, 0, ErrBadSignature},
		{"bad base64 then valid", header(specID, ts, "v1,!!! "+specSignature), specBody, specTime, 0, nil},
		{"unpadded base64", header(specID, ts, strings.TrimSuffix(specSignature, "=")), specBody, specTime, 0, ErrBadSignature},
		{"url alphabet", header(specID, ts, strings.NewReplacer("+", "-", "/", "_").Replace(specSignature)), specBody, specTime, 0, ErrBadSignature},
		{"truncated signature", header(specID, ts, specSignature[:20]), specBody, specTime, 0, ErrBadSignature},
		{"empty v1", header(specID, ts, "v1,"), specBody, specTime, 0, ErrBadSignature},
		{"comma-separated list", header(specID, ts, otherSig+","+specSignature), specBody, specTime, 0, ErrBadSignature},
		{"no headers", http.Header{}, specBody, specTime, 0, ErrMissingSignature},
		{"no id", header("", ts, specSignature), specBody, specTime, 0, ErrMissingSignature},
		{"no timestamp", header(specID, "", specSignature), specBody, specTime, 0, ErrMissingSignature},
		{"no signature", header(specID, ts, ""), specBody, specTime, 0, ErrMissingSignature},
		{"blank signature", header(specID, ts, "   "), specBody, specTime, 0, ErrMissingSignature},
		{"timestamp not a number", header(specID, "yesterday", specSignature), specBody, specTime, 0, ErrMissingSignature},
		{"timestamp in milliseconds", header(specID, "1614265330000", specSignature), specBody, specTime, 0, ErrTimestampTolerance},
		{"timestamp with sign", header(specID, "+1614265330", specSignature), specBody, specTime, 0, ErrMissingSignature},
		{"timestamp with leading zero", header(specID, "01614265330", specSignature), specBody, specTime, 0, ErrMissingSignature},
		{"negative timestamp", header(specID, "-1", specSignature), specBody, specTime, 0, ErrMissingSignature},
		{"fractional timestamp", header(specID, "1614265330.5", specSignature), specBody, specTime, 0, ErrMissingSignature},
		{"timestamp out of range", header(specID, "99999999999999999999", specSignature), specBody, specTime, 0, ErrMissingSignature},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := s.Verify(tt.h, []byte(tt.body), tt.now, tt.tolerance)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("Verify: %v", err)
				}
				return
			}
			if !errors.Is(err, tt.want) {
				t.Fatalf("Verify = %v, want %v", err, tt.want)
			}
			for _, v := range []string{tt.h.Get(HeaderSignature), tt.h.Get(HeaderID)} {
				if len(v) > 4 && strings.Contains(err.Error(), v) {
					t.Errorf("error %q repeats header value %q", err, v)
				}
			}
		})
	}
}

// mapHeader is a HeaderGetter that is not net/http's: exact, lower-case keys.
type mapHeader map[string]string

func (m mapHeader) Get(k string) string { return m[k] }

func TestSignerVerifyHeaderGetter(t *testing.T) {
	t.Parallel()
	s := specSigner(t)
	h := mapHeader(s.Headers(specID, specTime, []byte(specBody)))
	if err := s.Verify(h, []byte(specBody), specTime, 0); err != nil {
		t.Fatalf("Verify with a map of Headers: %v", err)
	}
	if h[HeaderSignature] != specSignature {
		t.Fatalf("Headers signature %q, want %q", h[HeaderSignature], specSignature)
	}
}

func TestNewSigner(t *testing.T) {
	t.Parallel()
	key24 := []byte("0123456789abcdefghijklmn") // 24 bytes
	raw := "a raw signing secret of 32 bytes"
	tests := []struct {
		name string
		in   string
		key  []byte // nil: error
	}{
		{"spec secret", specSecret, mustDecode(t, strings.TrimPrefix(specSecret, "whsec_"))},
		{"prefixed, 23 bytes", "whsec_" + base64.StdEncoding.EncodeToString(key24[:23]), nil},
		{"prefixed 24 bytes", "whsec_" + base64.StdEncoding.EncodeToString(key24), key24},
		{"prefixed unpadded", "whsec_" + base64.RawStdEncoding.EncodeToString(append(key24, 'x')), append(key24, 'x')},
		{"prefixed padded 25 bytes", "whsec_" + base64.StdEncoding.EncodeToString(append(key24, 'x')), append(key24, 'x')},
		{"prefixed with white space", " whsec_" + base64.StdEncoding.EncodeToString(key24) + "\n", key24},
		{"prefixed, not base64", "whsec_" + raw, nil},
		{"prefixed, url alphabet", "whsec_" + strings.Repeat("-_", 16), nil},
		{"prefixed, empty", "whsec_", nil},
		{"bare padded base64", base64.StdEncoding.EncodeToString(key24), key24},
		{"bare base64 of 16 bytes, too short for raw", base64.StdEncoding.EncodeToString(key24[:16]), nil},
		{"raw", raw, []byte(raw)},
		{"raw of 31 bytes", raw[:31], nil},
		{"empty", "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, err := NewSigner(tt.in)
			if tt.key == nil {
				if !errors.Is(err, ErrInvalidSecret) || s != nil {
					t.Fatalf("NewSigner = %v, %v; want ErrInvalidSecret", s, err)
				}
				if body := strings.TrimPrefix(strings.TrimSpace(tt.in), "whsec_"); len(body) > 4 && strings.Contains(err.Error(), body) {
					t.Errorf("error %q repeats the secret", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("NewSigner: %v", err)
			}
			want := &Signer{key: tt.key}
			if got, wantSig := s.Sign("id", specTime, nil), want.Sign("id", specTime, nil); got != wantSig {
				t.Fatalf("signer does not use the expected key")
			}
		})
	}
}

func TestNewMessageID(t *testing.T) {
	t.Parallel()
	pattern := regexp.MustCompile(`^msg_[A-Z2-7]{26}$`)
	seen := map[string]bool{}
	for range 100 {
		id := NewMessageID()
		if !pattern.MatchString(id) {
			t.Fatalf("id %q does not match %v", id, pattern)
		}
		if seen[id] {
			t.Fatalf("id %q repeated", id)
		}
		seen[id] = true
	}
}
