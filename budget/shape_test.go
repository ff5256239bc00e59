package budget

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"testing"
	"unicode/utf8"
)

// value is decoded JSON that keeps object key order and number literals.
type value struct {
	kind   byte // 'o', 'a', 's', 'n' (number), 'l' (true, false, null)
	text   string
	keys   []string
	values []*value
}

func decodeOrdered(t testing.TB, text []byte) *value {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(text))
	d.UseNumber()
	v, err := decodeValue(d)
	if err != nil {
		t.Fatalf("decoding %.200q: %v", text, err)
	}
	return v
}

func decodeValue(d *json.Decoder) (*value, error) {
	tok, err := d.Token()
	if err != nil {
		return nil, err
	}
	switch tok := tok.(type) {
	case json.Delim:
		v := &value{kind: 'a'}
		if tok == '{' {
			v.kind = 'o'
		}
		for d.More() {
			if v.kind == 'o' {
				k, err := d.Token()
				if err != nil {
					return nil, err
				}
				v.keys = append(v.keys, k.(string))
			}
			item, err := decodeValue(d)
			if err != nil {
				return nil, err
			}
			v.values = append(v.values, item)
		}
		_, err := d.Token() // the closing delimiter
		return v, err
	case string:
		return &value{kind: 's', text: tok}, nil
	case json.Number:
		return &value{kind: 'n', text: string(tok)}, nil
	default:
		return &value{kind: 'l', text: fmt.Sprint(tok)}, nil
	}
}

var (
	itemMarker   = regexp.MustCompile(`^\.\.\.(\d+) items truncated\.\.\.$`)
	stringMarker = regexp.MustCompile(`\.\.\.(\d+) (bytes|tokens) truncated\.\.\.`)
)

// checkShape asserts that out is a projection of in and returns the number
// of items dropped; see shapeError.
func checkShape(t testing.TB, p *Projector, in, out *value) int64 {
	t.Helper()
	dropped, err := shapeError(p, in, out, "$")
	if err != nil {
		t.Fatal(err)
	}
	return dropped
}

// shapeError checks that out is a projection of in: same kinds, keys in the
// same order, numbers and literals unchanged, strings whole or head and tail
// around a correct marker, arrays whole or head and tail items around one
// item marker. Input that itself holds marker-like strings is ambiguous, so
// every reading is tried.
func shapeError(p *Projector, in, out *value, path string) (int64, error) {
	if in.kind != out.kind {
		return 0, fmt.Errorf("%s: kind %c became %c", path, in.kind, out.kind)
	}
	switch in.kind {
	case 'n', 'l':
		if in.text != out.text {
			return 0, fmt.Errorf("%s: %s became %s", path, in.text, out.text)
		}
	case 's':
		if in.text != out.text {
			return 0, shortStringError(p, in.text, out.text, path)
		}
	case 'o':
		if fmt.Sprint(in.keys) != fmt.Sprint(out.keys) {
			return 0, fmt.Errorf("%s: keys %q became %q", path, in.keys, out.keys)
		}
		return pairwise(p, in.values, out.values, path, 0)
	case 'a':
		var err error
		if len(in.values) == len(out.values) {
			var dropped int64
			if dropped, err = pairwise(p, in.values, out.values, path, 0); err == nil {
				return dropped, nil
			}
		}
		for m, v := range out.values {
			match := itemMarker.FindStringSubmatch(v.text)
			if v.kind != 's' || match == nil {
				continue
			}
			n, _ := strconv.Atoi(match[1])
			head, tail := out.values[:m], out.values[m+1:]
			if n == 0 || len(head)+len(tail) == 0 || len(head)+len(tail)+n != len(in.values) {
				continue
			}
			if w := p.Config().Window; w == WindowHead && len(tail) > 0 || w == WindowTail && len(head) > 0 {
				continue
			}
			h, herr := pairwise(p, in.values[:m], head, path, 0)
			tl, terr := pairwise(p, in.values[len(in.values)-len(tail):], tail, path, len(in.values)-len(tail))
			if herr == nil && terr == nil {
				return int64(n) + h + tl, nil
			}
			err = errors.Join(herr, terr)
		}
		if err == nil {
			err = fmt.Errorf("%s: %d items became %d without a fitting marker", path, len(in.values), len(out.values))
		}
		return 0, err
	}
	return 0, nil
}

func pairwise(p *Projector, in, out []*value, path string, offset int) (int64, error) {
	var dropped int64
	for i := range in {
		d, err := shapeError(p, in[i], out[i], fmt.Sprintf("%s[%d]", path, offset+i))
		if err != nil {
			return 0, err
		}
		dropped += d
	}
	return dropped, nil
}

// shortStringError checks that out is a head and tail of in around a marker
// counting the dropped bytes.
func shortStringError(p *Projector, in, out, path string) error {
	for _, m := range stringMarker.FindAllStringSubmatchIndex(out, -1) {
		head, tail := out[:m[0]], out[m[1]:]
		if len(head)+len(tail) >= len(in) || in[:len(head)] != head || in[len(in)-len(tail):] != tail {
			continue
		}
		if out[m[4]:m[5]] != p.unit() {
			continue
		}
		n, _ := strconv.ParseInt(out[m[2]:m[3]], 10, 64)
		if want := p.inUnit(int64(len(in) - len(head) - len(tail))); utf8.ValidString(in) && n != want {
			return fmt.Errorf("%s: marker counts %d, want %d (string %q became %q)", path, n, want, in, out)
		}
		if w := p.Config().Window; w == WindowHead && tail != "" || w == WindowTail && head != "" {
			return fmt.Errorf("%s: window %s kept head %q and tail %q", path, w, head, tail)
		}
		return nil
	}
	return fmt.Errorf("%s: %q is not a head and tail of %q around a marker", path, out, in)
}
