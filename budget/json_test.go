package budget

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// projectJSON runs ProjectJSON and checks all its invariants, including the
// shape of a structural projection.
func projectJSON(t testing.TB, p *Projector, raw string) Result {
	t.Helper()
	r, err := p.ProjectJSON([]byte(raw))
	checkJSON(t, p, []byte(raw), r, err)
	if err != nil {
		t.Fatalf("ProjectJSON: %v", err)
	}
	if r.JSON && r.Truncated && len(raw) <= crossCheckLimit {
		if dropped := checkShape(t, p, decodeOrdered(t, []byte(raw)), decodeOrdered(t, r.Text)); dropped != r.DroppedItems {
			t.Fatalf("DroppedItems = %d, markers count %d", r.DroppedItems, dropped)
		}
	}
	return r
}

func TestProjectJSONWithinCaps(t *testing.T) {
	t.Parallel()
	p := mustNew(t, Config{Limit: 100, MaxLines: 5})
	for _, raw := range []string{`0`, `"x"`, ` {"a": [1, 2, 3]} ` + "\n", "[\n 1,\n 2\n]\n", `{"z":1,"a":2}`} {
		r := projectJSON(t, p, raw)
		if string(r.Text) != raw || r.Truncated || !r.JSON || r.DroppedBytes != 0 {
			t.Errorf("ProjectJSON(%q) = %+v, want it byte for byte", raw, r)
		}
	}
}

func TestProjectJSONCompacts(t *testing.T) {
	t.Parallel()
	raw := "{\n  \"name\": \"a b\",\n  \"list\": [\n    1,\n    2\n  ]\n}\n"
	tests := []struct {
		name string
		c    Config
	}{
		{"size cap", Config{Limit: 30}},
		{"line cap", Config{Limit: 1000, MaxLines: 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := mustNew(t, tt.c)
			r := projectJSON(t, p, raw)
			if string(r.Text) != `{"name":"a b","list":[1,2]}` || r.Truncated || !r.JSON || r.Bound != BoundNone {
				t.Errorf("got %+v (%s), want the compact form, not truncated", r, r.Text)
			}
			if r.DroppedBytes != int64(len(raw)-len(r.Text)) || r.DroppedLines != 6 {
				t.Errorf("dropped %d bytes, %d lines", r.DroppedBytes, r.DroppedLines)
			}
		})
	}
}

func TestProjectJSONExamples(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("0123456789", 20)
	tests := []struct {
		name string
		p    *Projector
		raw  string
		want string
	}{
		{"string head_tail", exact(t, 60, 1, ModeBytes, WindowHeadTail, 0.5), `{"log":"` + long + `"}`,
			`{"log":"012345678901...175 bytes truncated...7890123456789"}`},
		{"string head", exact(t, 60, 1, ModeBytes, WindowHead, 0.5), `{"log":"` + long + `"}`,
			`{"log":"0123456789012345678901234...175 bytes truncated..."}`},
		{"string tail", exact(t, 60, 1, ModeBytes, WindowTail, 0.5), `{"log":"` + long + `"}`,
			`{"log":"...175 bytes truncated...5678901234567890123456789"}`},
		{"string tokens", exact(t, 15, 1, ModeTokens, WindowHeadTail, 0.5), `{"log":"` + long + `"}`,
			`{"log":"012345678901...44 tokens truncated...7890123456789"}`},
		{"top-level string", exact(t, 40, 1, ModeBytes, WindowHeadTail, 0.5), `"` + long + `"`,
			`"012345...187 bytes truncated...3456789"`},
		{"array head_tail", exact(t, 50, 1, ModeBytes, WindowHeadTail, 0.5), `[` + seq(100) + `]`,
			`[0,1,2,3,4,"...91 items truncated...",96,97,98,99]`},
		{"array head", exact(t, 50, 1, ModeBytes, WindowHead, 0.5), `[` + seq(100) + `]`,
			`[0,1,2,3,4,5,6,7,8,9,"...90 items truncated..."]`},
		{"array tail", exact(t, 50, 1, ModeBytes, WindowTail, 0.5), `[` + seq(100) + `]`,
			`["...93 items truncated...",93,94,95,96,97,98,99]`},
		{"keys, order and numbers kept", exact(t, 120, 1, ModeBytes, WindowHeadTail, 0.5),
			`{"z":1e400,"a":-0.0,"m":12345678901234567890123,"s":"` + long + `","t":true,"n":null}`,
			`{"z":1e400,"a":-0.0,"m":12345678901234567890123,"s":"01234567890...178 bytes truncated...90123456789","t":true,"n":null}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := projectJSON(t, tt.p, tt.raw)
			if string(r.Text) != tt.want {
				t.Errorf("text = %s\nwant   %s", r.Text, tt.want)
			}
			if !r.JSON || !r.Truncated {
				t.Errorf("result %+v, want truncated JSON", r)
			}
		})
	}
}

func seq(n int) string {
	s := make([]string, n)
	for i := range s {
		s[i] = strconv.Itoa(i)
	}
	return strings.Join(s, ",")
}

// TestProjectJSONEscapes cuts strings full of escapes and multi-byte runes
// at every size and checks that no escape, surrogate pair or rune is split
// and that markers count decoded bytes.
func TestProjectJSONEscapes(t *testing.T) {
	t.Parallel()
	contents := []string{
		strings.Repeat(`a\n\"\\\/\u00e9\ud83d\ude00é€𝄞\t`, 8),
		strings.Repeat(`\ud83d\ude00`, 20),
		strings.Repeat(`\\u0041`, 20),
		strings.Repeat(`\ud800x\udc00`, 10), // lone surrogates
		strings.Repeat("𝄞", 30),
	}
	for _, content := range contents {
		raw := `["` + content + `"]`
		for limit := 20; limit <= len(raw); limit++ {
			for _, w := range []Window{WindowHead, WindowTail, WindowHeadTail} {
				projectJSON(t, exact(t, limit, 1, ModeBytes, w, 0.5), raw)
			}
		}
	}
}

func TestProjectJSONMarkerCountsDecodedBytes(t *testing.T) {
	t.Parallel()
	raw := `"` + strings.Repeat(`\u00e9`, 100) + `"` // 600 escaped, 200 decoded bytes
	r := projectJSON(t, exact(t, 40, 1, ModeBytes, WindowHead, 0.5), raw)
	if want := `"\u00e9\u00e9...196 bytes truncated..."`; string(r.Text) != want {
		t.Errorf("text = %s, want %s", r.Text, want)
	}
}

func TestProjectJSONInvalid(t *testing.T) {
	t.Parallel()
	for _, raw := range []string{
		``, ` `, `{`, `[1,]`, `{"a"}`, `{"a":}`, `{a:1}`, `[1 2]`, `01`, `1.`, `.5`, `+1`, `-`, `1e`, `tru`, `nul`,
		`"abc`, `"\x"`, `"\u12"`, "\"a\tb\"", `{"a":1}}`, `[1]x`, `{"a":1,}`, `[` + strings.Repeat(`"x",`, 10) + `]`,
	} {
		r, err := mustNew(t, Config{Limit: 4}).ProjectJSON([]byte(raw))
		if !errors.Is(err, ErrInvalidJSON) {
			t.Errorf("ProjectJSON(%q) = %+v, %v; want ErrInvalidJSON", raw, r, err)
		}
	}
}

func TestProjectJSONFallsBack(t *testing.T) {
	t.Parallel()
	var manyKeys strings.Builder
	manyKeys.WriteString("{")
	for i := range 5000 {
		fmt.Fprintf(&manyKeys, `%s"key%d":%d`, map[bool]string{true: ",", false: ""}[i > 0], i, i)
	}
	manyKeys.WriteString("}")
	tests := []struct {
		name string
		p    *Projector
		raw  string
	}{
		{"too many keys", mustNew(t, Config{Limit: 1000}), manyKeys.String()},
		{"huge number", mustNew(t, Config{Limit: 100}), strings.Repeat("9", 1000)},
		{"only item too big", mustNew(t, Config{Limit: 1000}), "[" + manyKeys.String() + "]"},
		{"deeper than encoding/json allows", mustNew(t, Config{Limit: 1000}), strings.Repeat("[", 100_000) + strings.Repeat("]", 100_000)},
		{"zero line cap", exact(t, 1000, 0, ModeBytes, WindowHeadTail, 0.5), "[1,\n2]"},
		{"zero size cap", exact(t, 0, 10, ModeBytes, WindowHeadTail, 0.5), `"x"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := projectJSON(t, tt.p, tt.raw)
			if r.JSON {
				t.Fatalf("kept structure: %.200s", r.Text)
			}
			if want := tt.p.Project([]byte(tt.raw)); !reflect.DeepEqual(r, want) {
				t.Errorf("fallback %s, want Project's %s", summary(r), summary(want))
			}
		})
	}
}

func TestProjectJSONKeepsTheItemThatFits(t *testing.T) {
	t.Parallel()
	var big strings.Builder
	big.WriteString(`{"k0":0`)
	for i := 1; i < 5000; i++ {
		fmt.Fprintf(&big, `,"k%d":%d`, i, i)
	}
	big.WriteString("}")
	r := projectJSON(t, mustNew(t, Config{Limit: 1000}), "["+big.String()+`,"last"]`)
	if string(r.Text) != `["...1 items truncated...","last"]` {
		t.Errorf("got %s", r.Text)
	}
}

func TestProjectJSONDeepNestingWithinLimit(t *testing.T) {
	t.Parallel()
	// 2*maxDepth bytes of brackets alone, so the cap must exceed that.
	raw := strings.Repeat("[", maxDepth) + `"` + strings.Repeat("x", 30000) + `"` + strings.Repeat("]", maxDepth)
	r := projectJSON(t, mustNew(t, Config{Limit: 2*maxDepth + 1000}), raw)
	if !r.JSON || !r.Truncated || len(r.Text) != 2*maxDepth+1000 {
		t.Errorf("depth %d: got %s, want a structural projection filling the cap", maxDepth, summary(r))
	}
}

// records builds an array of n realistic records.
func records(n int, seed uint64) string {
	rng := rand.New(rand.NewPCG(seed, 7))
	var b strings.Builder
	b.WriteString("[")
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		body := strings.Repeat("lorem ipsum dolor sit amet ", 2+rng.IntN(12))
		fmt.Fprintf(&b, `{"id":%d,"name":"user-%d","email":"user%d@example.com","score":%.3f,"active":%t,`+
			`"tags":["alpha","beta","gamma"],"address":{"city":"Zürich","zip":"80%02d"},"body":%q}`,
			i, i, i, rng.Float64()*100, rng.IntN(2) == 0, rng.IntN(100), body)
	}
	b.WriteString("]")
	return b.String()
}

// TestProjectJSONCloseToCap checks that the search fills the budget.
func TestProjectJSONCloseToCap(t *testing.T) {
	t.Parallel()
	var stdout strings.Builder
	for i := range 5000 {
		fmt.Fprintf(&stdout, "line %d of the build output\n", i)
	}
	out, _ := json.Marshal(map[string]any{"exit_code": 2, "stdout": stdout.String(), "stderr": strings.Repeat("warning: x\n", 800)})
	tests := []struct {
		name string
		raw  string
	}{
		{"records", records(3000, 1)},
		{"records in an envelope", `{"total":3000,"results":` + records(3000, 2) + `,"next":"cursor-abc"}`},
		{"command output", string(out)},
		{"numbers", "[" + seq(100_000) + "]"},
		{"strings", `["` + strings.Repeat(`a line of text", "`, 20_000) + `end"]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			for _, c := range []Config{{Limit: 4096}, {}, {Mode: ModeTokens}} {
				p := mustNew(t, c)
				r := projectJSON(t, p, tt.raw)
				if !r.JSON || len(r.Text) < p.sizeCap*9/10 {
					t.Errorf("limit %d %s: %d of %d bytes used (JSON %v)", c.Limit, c.Mode, len(r.Text), p.sizeCap, r.JSON)
				}
			}
		})
	}
}

// TestProjectJSONBoundedNodes checks that a long array gets nodes only for
// items that a projection could keep.
func TestProjectJSONBoundedNodes(t *testing.T) {
	t.Parallel()
	raw := []byte(records(30_000, 3)) // about 10 MiB
	p := mustNew(t, Config{})
	tr, err := p.parseJSON(raw, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(tr.nodes); n > 20_000 {
		t.Errorf("%d nodes for %d MiB of records; want them bounded by the cap", n, len(raw)>>20)
	}
	r := projectJSON(t, p, string(raw))
	if !r.JSON || r.DroppedItems == 0 {
		t.Errorf("got %+v", r)
	}
}

// TestProjectJSONNestedLongArrays checks that arrays of long arrays, whose
// zones multiply, stay within the node budget and still fill the cap.
func TestProjectJSONNestedLongArrays(t *testing.T) {
	t.Parallel()
	// Enough rows of enough items to outgrow the node budget of 16 KiB.
	row := "[" + seq(2000) + "]"
	embeddings := `{"data":[` + strings.Repeat(`{"embedding":`+row+`,"object":"embedding"},`, 40) + `{"embedding":[]}]}`
	for name, raw := range map[string]string{
		"matrix":     "[" + strings.Repeat(row+",", 40) + row + "]",
		"embeddings": embeddings,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			for _, c := range []Config{{}, {Window: WindowTail}} {
				p := mustNew(t, c)
				tr, err := p.parseJSON([]byte(raw), 1, nil)
				if !errors.Is(err, errTooManyNodes) {
					t.Errorf("%+v: a plain parse kept %d nodes; this test no longer needs the node budget", c, len(tr.nodes))
				}
				r := projectJSON(t, p, raw)
				if !r.JSON || len(r.Text) < p.sizeCap*8/10 {
					t.Errorf("%+v: %d of %d bytes used (JSON %v)", c, len(r.Text), p.sizeCap, r.JSON)
				}
			}
		})
	}
}

// randomJSON builds a random value with strings full of escapes and runes.
func randomJSON(rng *rand.Rand, depth int) string {
	pieces := []string{"a", "bcd", " ", `\n`, `\"`, `\\`, `\u00e9`, `\ud83d\ude00`, "é", "€", "𝄞", `\t`, "xyz"}
	str := func(n int) string {
		var b strings.Builder
		b.WriteByte('"')
		for range n {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		b.WriteByte('"')
		return b.String()
	}
	k := rng.IntN(10)
	if depth <= 0 {
		k = rng.IntN(3)
	}
	switch {
	case k == 0:
		return str(rng.IntN(60))
	case k == 1:
		return []string{"0", "-1.5e10", "123456789012345678901234567890", "true", "false", "null"}[rng.IntN(6)]
	case k == 2:
		return str(rng.IntN(4))
	case k < 6:
		n := rng.IntN(12)
		if rng.IntN(8) == 0 {
			n = rng.IntN(200) // sometimes a long array
		}
		items := make([]string, n)
		for i := range items {
			items[i] = randomJSON(rng, depth-1)
		}
		return "[" + strings.Join(items, ", ") + "]"
	}
	n := rng.IntN(6)
	members := make([]string, n)
	for i := range members {
		members[i] = str(1+rng.IntN(3)) + ": " + randomJSON(rng, depth-1)
	}
	return "{" + strings.Join(members, ",\n") + "}"
}

func TestProjectJSONRandom(t *testing.T) {
	t.Parallel()
	eachSeed(t, 6, 99, func(t *testing.T, rng *rand.Rand) {
		for range 200 {
			raw := randomJSON(rng, 1+rng.IntN(3))
			for range 3 {
				p := randomProjectorWithin(t, rng, rng.IntN(len(raw)+50), 1+rng.IntN(3))
				projectJSON(t, p, raw)
			}
		}
	})
}

func TestProjectJSONDoesNotAlias(t *testing.T) {
	t.Parallel()
	raw := []byte(`{"a":"b"}`)
	r, err := mustNew(t, Config{}).ProjectJSON(raw)
	if err != nil {
		t.Fatal(err)
	}
	raw[2] = 'X'
	if !bytes.Equal(r.Text, []byte(`{"a":"b"}`)) {
		t.Error("result changed with its input")
	}
}
