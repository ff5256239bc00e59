package budget_test

import (
	"bytes"
	"fmt"
	"io"
	"strings"

	"github.com/turnd/turnd/budget"
)

func ExampleProjector_Project() {
	p, err := budget.New(budget.Config{MaxLines: 4})
	if err != nil {
		panic(err)
	}
	var out strings.Builder
	for i := 1; i <= 10; i++ {
		fmt.Fprintf(&out, "line %d\n", i)
	}
	r := p.Project([]byte(out.String()))
	fmt.Print(string(r.Text))
	fmt.Println(r.Bound, r.DroppedLines, r.DroppedBytes)
	// Output:
	// line 1
	// line 2
	// ...6 lines truncated...
	// line 9
	// line 10
	// lines 6 42
}

func ExampleProjector_Project_size() {
	p, err := budget.New(budget.Config{Limit: 26, Mode: budget.ModeBytes})
	if err != nil {
		panic(err)
	}
	r := p.Project([]byte("error: " + strings.Repeat("x", 100) + " at main.go:42"))
	fmt.Println(string(r.Text))
	fmt.Println(r.Bound, r.Unit, r.DroppedBytes)
	// Output:
	// error: xxxxxx
	// ...95 bytes truncated...
	// at main.go:42
	// size bytes 95
}

func ExampleProjector_ProjectJSON() {
	p, err := budget.New(budget.Config{Limit: 200})
	if err != nil {
		panic(err)
	}
	raw := `{
  "status": "ok",
  "count": 100,
  "items": [` + strings.Repeat(`"item", `, 99) + `"last"],
  "log": "` + strings.Repeat(`step done\n`, 50) + `"
}`
	r, err := p.ProjectJSON([]byte(raw))
	if err != nil {
		panic(err) // not JSON: the caller would use p.Project instead
	}
	fmt.Println(string(r.Text))
	fmt.Println(r.JSON, r.Truncated, r.DroppedItems, len(r.Text))
	// Output:
	// {"status":"ok","count":100,"items":["item","item","item","item","...93 items truncated...","item","item","last"],"log":"step done\nstep done\n...452 bytes truncated...ep done\nstep done\nstep done\n"}
	// true true 93 200
}

func ExampleStream() {
	p, err := budget.New(budget.Config{Limit: 60, Window: budget.WindowTail})
	if err != nil {
		panic(err)
	}
	body := strings.NewReader(strings.Repeat("chunk of a response body\n", 1000))

	// Keep the whole body in a spool of one's own while projecting it.
	var spool bytes.Buffer
	s := p.NewStream()
	if _, err := io.Copy(io.MultiWriter(&spool, s), body); err != nil {
		panic(err)
	}
	r := s.Result()
	fmt.Print(string(r.Text))
	fmt.Println(spool.Len(), r.OriginalBytes, r.OriginalLines)
	// Output:
	// ...24950 bytes truncated...
	// chunk of a response body
	// chunk of a response body
	// 25000 25000 1000
}
