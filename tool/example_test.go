package tool_test

import (
	"encoding/json"
	"fmt"

	"github.com/turnd/turnd/tool"
)

func ExampleParse() {
	reg, err := tool.Parse([]byte(`
tools:
  - name: search_docs
    description: Search the documentation
    effect: read
    input_schema: {type: object, properties: {q: {type: string}}, required: [q]}
    http: {url: "http://127.0.0.1:9000/search", timeout: 5s}
builtin: [echo]
`), tool.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer reg.CloseIdleConnections()
	for _, s := range reg.List() {
		fmt.Println(s.Name, s.Effect)
	}
	s, _ := reg.Lookup("search_docs")
	fmt.Println(s.Validate(json.RawMessage(`{"q": 1}`)))
	// Output:
	// echo read
	// search_docs read
	// at /q: got number, want string
}

func ExampleParse_error() {
	_, err := tool.Parse([]byte(`
tools:
  - name: search_docs
    http:
      url: http://127.0.0.1:9000/search
      timeout: 30
      headers: {Authorization: "Bearer ${UNSET_TOKEN}"}
`), tool.Options{Env: func(string) (string, bool) { return "", false }})
	fmt.Println(err)
	// Output:
	// tool config: line 6: tool "search_docs": http.timeout "30" is not a duration such as "30s"
	// tool config: line 7: tool "search_docs": http.headers.Authorization: environment variable UNSET_TOKEN is not set
}
