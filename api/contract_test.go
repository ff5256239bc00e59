package api_test

// This file holds the router to openapi.yaml, the HTTP contract:
//
//   - TestSpecValid: the document loads, validates (examples included) and
//     is complete enough to hold the server to: operation ids, documented
//     errors, bearer authentication only under /v1 and there on every
//     operation but the completion endpoints (/v1/complete/..., whose key is
//     the credential).
//   - TestRoutesMatchSpec: the chi routes and the document's operations are
//     the same set.
//   - contractChecker: test machinery for the functional API tests. Its
//     Transport validates every request/response pair that goes through it
//     against the document and fails the test on any mismatch:
//
//	cc := newContractChecker(t)
//	srv := httptest.NewServer(handler)
//	client := &http.Client{Transport: cc.Transport(http.DefaultTransport)}
//	// or, without a listener: cc.Transport(inProcess(handler))
//
// The rules the Transport applies, for each request:
//
//   - The request's route must be an operation of the document. A path the
//     document does not have must be answered 404, and a method a path does
//     not list 405, both with the document's problem, with or without a
//     token: the router authenticates inside its route group, after routing,
//     so 401 is an answer of the authenticated operations only.
//   - The answer's status must be listed under the operation (the document
//     has no `default` responses, so an undocumented status fails), and its
//     headers and body must match the listed response. Any
//     application/problem+json body must also be a Problem whose `status`
//     is the HTTP status.
//   - A request the document rejects (a bad parameter or body, no bearer
//     token) must be answered with a 4xx. So negative tests can send invalid
//     requests on purpose, but a server that accepts what the document says
//     it refuses fails. Consequences for test authors: always send a bearer
//     token (any token satisfies the document when the server has none
//     configured), and send JSON bodies with Content-Type: application/json.
//   - The bodies of GET /v1/outputs/{output_id} (raw bytes) and GET
//     /openapi.yaml are not validated, their statuses and headers are.

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
	"github.com/go-chi/chi/v5"

	turnd "github.com/turnd/turnd"
	"github.com/turnd/turnd/api"
	"github.com/turnd/turnd/completion"
	"github.com/turnd/turnd/tool"
	"github.com/turnd/turnd/turn"
)

const problemJSON = "application/problem+json"

// rawBodyOperations are the operations whose success bodies are not JSON
// documents the spec describes: outputs are the tools' bytes, and the spec
// is YAML. Their problems are validated all the same.
var rawBodyOperations = map[string]bool{"getOutput": true, "getOpenAPI": true, "getTurnEvents": true}

// contract is the loaded, validated document and its router, shared by
// every checker of the test binary: loading and validating the document
// (examples included) costs milliseconds, and kin-openapi's documents and
// routers are safe for concurrent reads (its validation middleware relies
// on that).
type contract struct {
	doc    *openapi3.T
	router routers.Router
	// server is the host the router matches: kin-openapi routers match the
	// document's servers, so requests are rewritten onto it for routing.
	server *url.URL
}

var loadContract = sync.OnceValues(func() (*contract, error) {
	doc, err := loadSpec()
	if err != nil {
		return nil, err
	}
	if len(doc.Servers) == 0 {
		return nil, errors.New("openapi.yaml lists no servers")
	}
	server, err := url.Parse(doc.Servers[0].URL)
	if err != nil {
		return nil, fmt.Errorf("parsing the first server URL: %w", err)
	}
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		return nil, fmt.Errorf("building the router: %w", err)
	}
	return &contract{doc: doc, router: router, server: server}, nil
})

// loadSpec loads and validates the embedded openapi.yaml.
func loadSpec() (*openapi3.T, error) {
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(turnd.OpenAPI)
	if err != nil {
		return nil, fmt.Errorf("loading openapi.yaml: %w", err)
	}
	if err := doc.Validate(loader.Context, openapi3.EnableMultiError()); err != nil {
		return nil, fmt.Errorf("validating openapi.yaml: %w", err)
	}
	return doc, nil
}

// contractChecker validates HTTP exchanges against openapi.yaml and reports
// mismatches with t.Errorf. It is safe for concurrent use.
type contractChecker struct {
	t testing.TB
	*contract
}

// newContractChecker returns a checker that reports to t.
func newContractChecker(t testing.TB) *contractChecker {
	t.Helper()
	c, err := loadContract()
	if err != nil {
		t.Fatalf("contract: %v", err)
	}
	return &contractChecker{t: t, contract: c}
}

// Transport returns a RoundTripper that sends requests through base
// (http.DefaultTransport when nil) and validates each request and its
// response against the document, reporting every mismatch to the checker's
// test (see the rules at the top of this file). The caller receives the
// response with its body intact. Exchanges that fail before a response
// (network errors, a cancelled context) are not checked.
//
// The Transport reports with t.Errorf, so a request must finish before its
// test does.
func (c *contractChecker) Transport(base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		return c.roundTrip(base, req)
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

func (c *contractChecker) roundTrip(base http.RoundTripper, req *http.Request) (*http.Response, error) {
	// Buffer the request body: the validator reads it and the server needs
	// it too. ContentLength is kept as the caller set it, so a chunked body
	// stays chunked (the server's size limits take other paths for those).
	if streamedBody(req) {
		return c.roundTripStreamed(base, req)
	}
	var body []byte
	if req.Body != nil && req.Body != http.NoBody {
		b, err := io.ReadAll(req.Body)
		_ = req.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("contract: reading the request body: %w", err)
		}
		body = b
	}
	in, routeErr, reqErr := c.validateRequest(req, body)
	resp, err := base.RoundTrip(withBody(req.Clone(req.Context()), body))
	if err != nil {
		return nil, err
	}
	return c.checkExchange(req, resp, in, routeErr, reqErr)
}

// withBody is r with body as its body, read afresh by each reader (r as it
// is for a nil body).
func withBody(r *http.Request, body []byte) *http.Request {
	if body != nil {
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	}
	return r
}

// validateRequest validates req, whose body is body, against the document:
// the request's route (in; nil when none matches, routeErr says why) and
// what the validator found wrong with it (reqErr).
func (c *contractChecker) validateRequest(req *http.Request, body []byte) (in *openapi3filter.RequestValidationInput, routeErr, reqErr error) {
	// The validator's copy of the request, on the document's server.
	vreq := withBody(req.Clone(req.Context()), body)
	u := *req.URL
	u.Scheme, u.Host = c.server.Scheme, c.server.Host
	vreq.URL, vreq.Host = &u, c.server.Host
	route, pathParams, routeErr := c.router.FindRoute(vreq)
	if routeErr != nil {
		return nil, routeErr, nil
	}
	in = &openapi3filter.RequestValidationInput{Request: vreq, PathParams: pathParams, Route: route, Options: c.options()}
	return in, nil, openapi3filter.ValidateRequest(req.Context(), in)
}

// streamedBody reports whether req's body is a streamed turn, which the
// checker must pass on as it is written rather than buffer first.
func streamedBody(req *http.Request) bool {
	ct := req.Header.Get("Content-Type")
	return req.Body != nil && (strings.HasPrefix(ct, "text/event-stream") || strings.HasPrefix(ct, "application/x-ndjson"))
}

// roundTripStreamed sends a streamed body as the caller writes it, keeping
// a copy, and validates the request with that copy once answered.
func (c *contractChecker) roundTripStreamed(base http.RoundTripper, req *http.Request) (*http.Response, error) {
	var copyBuf bytes.Buffer
	sent := req.Clone(req.Context())
	sent.Body = struct {
		io.Reader
		io.Closer
	}{io.TeeReader(req.Body, &copyBuf), req.Body}
	resp, err := base.RoundTrip(sent)
	if err != nil {
		return nil, err
	}
	data, rerr := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(data))
	if rerr != nil {
		resp.Body = io.NopCloser(io.MultiReader(bytes.NewReader(data), errReader{rerr}))
		return resp, nil
	}
	body := copyBuf.Bytes()
	if body == nil {
		body = []byte{}
	}
	in, routeErr, reqErr := c.validateRequest(req, body)
	return c.checkExchange(req, resp, in, routeErr, reqErr)
}

// checkExchange checks an answered request against the document.
func (c *contractChecker) checkExchange(req *http.Request, resp *http.Response, in *openapi3filter.RequestValidationInput, routeErr, reqErr error) (*http.Response, error) {
	data, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		// Hand the failure to the caller where it would have met it.
		resp.Body = io.NopCloser(io.MultiReader(bytes.NewReader(data), errReader{err}))
		return resp, nil
	}
	resp.Body = io.NopCloser(bytes.NewReader(data))

	x := exchange{method: req.Method, path: req.URL.Path, query: req.URL.RawQuery, status: resp.StatusCode, header: resp.Header, body: data}
	switch {
	case routeErr == nil:
		c.checkOperation(x, in, reqErr)
	case errors.Is(routeErr, routers.ErrPathNotFound):
		c.checkUnrouted(x, http.StatusNotFound, "NotFound")
	case errors.Is(routeErr, routers.ErrMethodNotAllowed):
		c.checkUnrouted(x, http.StatusMethodNotAllowed, "MethodNotAllowed")
	default:
		c.errorf(x, "", "routing the request: %v", routeErr)
	}
	c.checkProblem(x)
	return resp, nil
}

// exchange is what a check needs of a request/response pair.
type exchange struct {
	method, path, query string
	status              int
	header              http.Header
	body                []byte
}

func (c *contractChecker) errorf(x exchange, operationID, format string, args ...any) {
	c.t.Helper()
	op := ""
	if operationID != "" {
		op = " (" + operationID + ")"
	}
	target := x.path
	if x.query != "" {
		target += "?" + x.query
	}
	c.t.Errorf("contract: %s %s%s → %d: %s", x.method, target, op, x.status, fmt.Sprintf(format, args...))
}

// checkOperation holds the answer of a routed request to its operation.
func (c *contractChecker) checkOperation(x exchange, in *openapi3filter.RequestValidationInput, reqErr error) {
	c.t.Helper()
	op := in.Route.Operation
	if op.Responses.Status(x.status) == nil && op.Responses.Default() == nil {
		c.errorf(x, op.OperationID, "status %d is not documented (documented: %s)", x.status, strings.Join(documentedStatuses(op), ", "))
		return
	}
	if reqErr != nil && (x.status < 400 || x.status > 499) {
		c.errorf(x, op.OperationID, "the document rejects the request, so a 4xx answer was expected: %v", reqErr)
	}
	opts := c.options()
	opts.IncludeResponseStatus = true
	opts.ExcludeResponseBody = rawBodyOperations[op.OperationID] && mediaType(x.header) != problemJSON
	out := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in,
		Status:                 x.status,
		Header:                 x.header,
		Options:                opts,
	}
	out.SetBodyBytes(x.body)
	if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
		c.errorf(x, op.OperationID, "%v", err)
	}
}

// checkUnrouted holds the answer to a request no operation matches to the
// component response named want (NotFound, MethodNotAllowed). Under /v1
// too: authentication runs after routing, so an unrouted request is never
// answered 401.
func (c *contractChecker) checkUnrouted(x exchange, want int, responseName string) {
	c.t.Helper()
	if x.status != want {
		c.errorf(x, "", "no operation of the document matches the request, so %d was expected", want)
		return
	}
	ref := c.doc.Components.Responses[responseName]
	if ref == nil {
		c.errorf(x, "", "the document has no components/responses/%s to check the answer with", responseName)
		return
	}
	vreq, _ := http.NewRequest(x.method, x.path, nil)
	in := &openapi3filter.RequestValidationInput{
		Request: vreq,
		Route: &routers.Route{
			Spec:      c.doc,
			Path:      x.path,
			Method:    x.method,
			Operation: &openapi3.Operation{Responses: openapi3.NewResponses(openapi3.WithStatus(want, ref))},
		},
	}
	opts := c.options()
	opts.IncludeResponseStatus = true
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: x.status, Header: x.header, Options: opts}
	out.SetBodyBytes(x.body)
	if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
		c.errorf(x, "", "as components/responses/%s: %v", responseName, err)
	}
}

// checkProblem holds any application/problem+json body to the Problem
// schema, whatever the operation documents, and its status member to the
// HTTP status.
func (c *contractChecker) checkProblem(x exchange) {
	c.t.Helper()
	if mediaType(x.header) != problemJSON {
		return
	}
	var v any
	if err := json.Unmarshal(x.body, &v); err != nil {
		c.errorf(x, "", "the problem body is not JSON: %v", err)
		return
	}
	schema := c.doc.Components.Schemas["Problem"]
	if schema == nil {
		c.errorf(x, "", "the document has no components/schemas/Problem")
		return
	}
	if err := schema.Value.VisitJSON(v, openapi3.EnableJSONSchema2020(), openapi3.MultiErrors(), openapi3.SetSchemaErrorMessageCustomizer(shortSchemaError)); err != nil {
		c.errorf(x, "", "the body is not a Problem: %v", err)
		return
	}
	if m, ok := v.(map[string]any); ok {
		if s, ok := m["status"].(float64); ok && int(s) != x.status {
			c.errorf(x, "", "the problem's status member is %v, not the HTTP status", s)
		}
	}
}

// options are the validation options of every check.
func (c *contractChecker) options() *openapi3filter.Options {
	opts := &openapi3filter.Options{
		AuthenticationFunc:  bearerPresent,
		MultiError:          true,
		SkipSettingDefaults: true,
	}
	opts.WithCustomSchemaErrorFunc(shortSchemaError)
	return opts
}

// bearerPresent accepts any bearer token: the document says a token is
// required, which token is the server's business.
func bearerPresent(_ context.Context, in *openapi3filter.AuthenticationInput) error {
	s := in.SecurityScheme
	if s == nil || s.Type != "http" || !strings.EqualFold(s.Scheme, "bearer") {
		return in.NewError(fmt.Errorf("the contract checker knows only HTTP bearer schemes, not %q", in.SecuritySchemeName))
	}
	scheme, token, _ := strings.Cut(in.RequestValidationInput.Request.Header.Get("Authorization"), " ")
	if !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(token) == "" {
		return in.NewError(errors.New("no bearer token in the Authorization header"))
	}
	return nil
}

// shortSchemaError replaces kin-openapi's messages, which embed the whole
// schema, with the failing location, the reason and the value.
func shortSchemaError(err *openapi3.SchemaError) string {
	if err.Origin != nil {
		return "" // the default message is the origin's
	}
	var b strings.Builder
	if p := err.JSONPointer(); len(p) > 0 && !strings.Contains(err.Reason, "/"+strings.Join(p, "/")) {
		b.WriteString("at /" + strings.Join(p, "/") + ": ")
	}
	b.WriteString(err.Reason)
	if v, jerr := json.Marshal(err.Value); jerr == nil {
		s := string(v)
		if len(s) > 200 {
			s = s[:200] + "…"
		}
		b.WriteString(" (value: " + s + ")")
	}
	return b.String()
}

func documentedStatuses(op *openapi3.Operation) []string {
	var out []string
	for code := range op.Responses.Map() {
		out = append(out, code)
	}
	slices.Sort(out)
	return out
}

func mediaType(h http.Header) string {
	mt, _, err := mime.ParseMediaType(h.Get("Content-Type"))
	if err != nil {
		return ""
	}
	return mt
}

type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }

// inProcess returns a RoundTripper that serves requests with h directly,
// without a listener: c.Transport(inProcess(h)) checks the handler in
// process. The handler sees the request as a server would (RequestURI,
// RemoteAddr set); the response is an httptest.ResponseRecorder's.
func inProcess(h http.Handler) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		r := req.Clone(req.Context())
		if r.Body == nil {
			r.Body = http.NoBody
		}
		r.RequestURI = req.URL.RequestURI()
		r.RemoteAddr = "192.0.2.1:1234"
		if r.Host == "" {
			r.Host = req.URL.Host
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		if req.Body != nil {
			_ = req.Body.Close()
		}
		resp := rec.Result()
		resp.Request = req
		return resp, nil
	})
}

func TestSpecValid(t *testing.T) {
	t.Parallel()
	doc, err := loadSpec()
	if err != nil {
		t.Fatal(err)
	}
	if !doc.IsOpenAPI31OrLater() {
		t.Errorf("openapi is %q, want 3.1", doc.OpenAPI)
	}
	if doc.Info == nil || strings.TrimSpace(doc.Info.Description) == "" {
		t.Error("info.description is empty")
	}
	if len(doc.Servers) == 0 || doc.Servers[0].URL != "http://127.0.0.1:8080" {
		t.Errorf("the first server is not http://127.0.0.1:8080")
	}
	if len(doc.Security) != 1 || doc.Security[0]["bearerAuth"] == nil {
		t.Errorf("the global security requirement is %v, want bearerAuth only", doc.Security)
	}
	if _, ok := doc.Components.Schemas["Problem"]; !ok {
		t.Error("components/schemas/Problem is missing")
	}
	for _, name := range []string{"NotFound", "MethodNotAllowed"} {
		if _, ok := doc.Components.Responses[name]; !ok {
			t.Errorf("components/responses/%s is missing: the contract checker answers unrouted requests with it", name)
		}
	}

	for _, path := range doc.Paths.InMatchingOrder() {
		for method, op := range doc.Paths.Value(path).Operations() {
			where := method + " " + path
			if op.OperationID == "" {
				t.Errorf("%s: no operationId", where)
			}
			// Authentication: a bearer token under /v1, except for the
			// completion endpoints, whose key is the credential; nothing
			// elsewhere.
			public := op.Security != nil && len(*op.Security) == 0
			bearer := strings.HasPrefix(path, "/v1/") && !isCompletionPath(path)
			if bearer == public {
				t.Errorf("%s: security %v; /v1 operations use the global bearerAuth, the completion endpoints (/v1/complete/...) and the others none (security: [])", where, op.Security)
			}
			if bearer && op.Responses.Status(http.StatusUnauthorized) == nil {
				t.Errorf("%s: an authenticated operation must document 401", where)
			}
			// The guard answers before any route: every operation can see
			// 403 and 431; bodies can be too slow (408) or not JSON (415).
			guarded := []int{http.StatusForbidden, http.StatusRequestHeaderFieldsTooLarge}
			if method == http.MethodPost && !strings.HasSuffix(path, "/cancel") {
				guarded = append(guarded, http.StatusRequestTimeout)
			}
			if method == http.MethodPost && !isCompletionPath(path) {
				guarded = append(guarded, http.StatusUnsupportedMediaType)
			}
			for _, status := range guarded {
				if op.Responses.Status(status) == nil {
					t.Errorf("%s: status %d is not documented; the guard answers it before any route", where, status)
				}
			}
			errs := 0
			for code, ref := range op.Responses.Map() {
				status, err := strconv.Atoi(code)
				if err != nil {
					t.Errorf("%s: response %q: only explicit status codes hold the server to the document", where, code)
					continue
				}
				if status < 400 {
					continue
				}
				errs++
				mt := ref.Value.Content.Get(problemJSON)
				if mt == nil {
					continue // documented non-problem errors (readyz, ranges)
				}
				if !refersTo(mt.Schema, "#/components/schemas/Problem") {
					t.Errorf("%s: %s: the problem+json schema is not (allOf) components/schemas/Problem", where, code)
				}
			}
			if errs == 0 {
				t.Errorf("%s: no documented error response", where)
			}
		}
	}
}

// isCompletionPath reports whether path is one of the completion endpoints,
// which authenticate by their key instead of a bearer token.
func isCompletionPath(path string) bool {
	return strings.HasPrefix(path, "/v1/complete/")
}

// refersTo reports whether s is the schema ref, or an allOf that contains it.
func refersTo(s *openapi3.SchemaRef, ref string) bool {
	if s == nil {
		return false
	}
	if s.Ref == ref {
		return true
	}
	return s.Value != nil && slices.ContainsFunc(s.Value.AllOf, func(a *openapi3.SchemaRef) bool { return a.Ref == ref })
}

// panicStore is the store of tests that build the handler but never reach
// the store (route walks, requests refused before the service reads
// anything). Its embedded interface is nil, so every method panics: a test
// that does reach the store fails loudly. Embedding keeps it compiling as
// turn.Store grows.
type panicStore struct{ turn.Store }

// unknownKeysStore is a panicStore that knows no completion key: requests
// to the completion endpoints get as far as the key's lookup (404).
type unknownKeysStore struct{ panicStore }

func (unknownKeysStore) GetCompletion(context.Context, string, [32]byte) (turn.Completion, error) {
	return turn.Completion{}, turn.ErrNotFound
}

func (unknownKeysStore) GetDelivery(context.Context, string, [32]byte) (turn.DeliveryTarget, error) {
	return turn.DeliveryTarget{}, turn.ErrNotFound
}

// newStorelessHandler returns the API handler over a service whose store
// panics (see panicStore).
func newStorelessHandler(t testing.TB, cfg api.Config) http.Handler {
	t.Helper()
	return newHandlerOver(t, panicStore{}, cfg)
}

// newHandlerOver returns the API handler over a service on store.
func newHandlerOver(t testing.TB, store turn.Store, cfg api.Config) http.Handler {
	t.Helper()
	svc, err := turn.New(turn.Config{
		Store: store,
		Tools: func() *tool.Registry { return tool.NewRegistry() },
	})
	if err != nil {
		t.Fatalf("turn.New: %v", err)
	}
	cfg.Service = svc
	return api.New(cfg)
}

func TestRoutesMatchSpec(t *testing.T) {
	t.Parallel()
	h := newStorelessHandler(t, api.Config{})
	routes, ok := h.(chi.Routes)
	if !ok {
		t.Fatalf("api.New returned %T, which is not a chi.Routes: the route walk needs the router", h)
	}
	got := map[string]bool{}
	err := chi.Walk(routes, func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		got[method+" "+normalizePattern(route)] = true
		return nil
	})
	if err != nil {
		t.Fatalf("walking the routes: %v", err)
	}

	c := newContractChecker(t)
	want := map[string]bool{}
	for path, item := range c.doc.Paths.Map() {
		for method := range item.Operations() {
			want[method+" "+normalizePattern(path)] = true
		}
	}

	var notInSpec, notRouted []string
	for r := range got {
		if !want[r] {
			notInSpec = append(notInSpec, r)
		}
	}
	for r := range want {
		if !got[r] {
			notRouted = append(notRouted, r)
		}
	}
	slices.Sort(notInSpec)
	slices.Sort(notRouted)
	if len(notInSpec) > 0 {
		t.Errorf("routes missing from openapi.yaml:\n\t%s", strings.Join(notInSpec, "\n\t"))
	}
	if len(notRouted) > 0 {
		t.Errorf("operations of openapi.yaml the router lacks:\n\t%s", strings.Join(notRouted, "\n\t"))
	}
}

// normalizePattern writes a chi or OpenAPI path pattern in one form: path
// parameters keep their names (a handler reads chi.URLParam by the name the
// document gives) but lose chi's regular expressions ({id:[0-9]+} → {id}),
// and a trailing slash is dropped.
func normalizePattern(p string) string {
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		if p[i] != '{' {
			b.WriteByte(p[i])
			continue
		}
		depth, j := 0, i
		for ; j < len(p); j++ {
			if p[j] == '{' {
				depth++
			} else if p[j] == '}' {
				if depth--; depth == 0 {
					break
				}
			}
		}
		name, _, _ := strings.Cut(p[i+1:min(j, len(p))], ":")
		b.WriteString("{" + name + "}")
		i = j
	}
	out := b.String()
	if len(out) > 1 {
		out = strings.TrimSuffix(out, "/")
	}
	return out
}

func TestNormalizePattern(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"/", "/"},
		{"/v1/tools", "/v1/tools"},
		{"/v1/tools/", "/v1/tools"},
		{"/v1/sessions/{session_id}/turns/{turn_id}", "/v1/sessions/{session_id}/turns/{turn_id}"},
		{"/v1/outputs/{output_id:[a-z0-9_]+}", "/v1/outputs/{output_id}"},
		{"/v1/x/{id:[0-9]{3}}/y", "/v1/x/{id}/y"},
	}
	for _, tt := range tests {
		if got := normalizePattern(tt.in); got != tt.want {
			t.Errorf("normalizePattern(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestContractCheckerOnServer runs the checker over the answers the real
// handler gives without a store (one that knows no completion key): it must
// find nothing to report.
func TestContractCheckerOnServer(t *testing.T) {
	t.Parallel()
	h := newHandlerOver(t, unknownKeysStore{}, api.Config{Tokens: []string{"secret"}, MaxBodyBytes: 1 << 10})
	client := &http.Client{Transport: newContractChecker(t).Transport(inProcess(h))}

	tests := []struct {
		name       string
		method     string
		path       string
		token      bool
		body       string
		wantStatus int
	}{
		{"health", "GET", "/healthz", false, "", 200},
		{"spec", "GET", "/openapi.yaml", false, "", 200},
		{"tools", "GET", "/v1/tools", true, "", 200},
		{"no token", "GET", "/v1/tools", false, "", 401},
		{"unknown path", "GET", "/nope", false, "", 404},
		{"unknown /v1 path", "GET", "/v1/nope", true, "", 404},
		{"unknown /v1 path without token", "GET", "/v1/nope", false, "", 404},
		{"wrong method", "DELETE", "/v1/tools", true, "", 405},
		{"wrong method without token", "DELETE", "/v1/tools", false, "", 405},
		{"cancel without token", "POST", "/v1/sessions/s1/turns/t1/cancel", false, "", 401},
		{"completion status, no token needed", "GET", "/v1/complete/" + testKey, false, "", 404},
		{"completion status, malformed key", "GET", "/v1/complete/nope", false, "", 404},
		{"delivery, no token needed", "POST", "/v1/complete/" + testKey, false, `{"output":{"ok":true}}`, 404},
		{"delivery of an error", "POST", "/v1/complete/" + testKey, false, `{"error":{"code":"rejected"}}`, 404},
		{"delivery of null output", "POST", "/v1/complete/" + testKey, false, `{"output":null,"error":null}`, 404},
		{"delivery, malformed JSON", "POST", "/v1/complete/" + testKey, false, "{", 400},
		{"delivery, empty object", "POST", "/v1/complete/" + testKey, false, `{}`, 422},
		{"delivery, output and error", "POST", "/v1/complete/" + testKey, false, `{"output":1,"error":{"code":"x"}}`, 422},
		{"delivery, error without code", "POST", "/v1/complete/" + testKey, false, `{"error":{"message":"m"}}`, 422},
		{"delivery too large", "POST", "/v1/complete/" + testKey, false, `{"output":"` + strings.Repeat("x", 2<<10) + `"}`, 413},
		{"heartbeat, no token needed", "POST", "/v1/complete/" + testKey + "/heartbeat", false, "", 404},
		{"heartbeat with a body", "POST", "/v1/complete/" + testKey + "/heartbeat", false, `{"progress":0.5}`, 404},
		{"completion, wrong method", "DELETE", "/v1/complete/" + testKey, false, "", 405},
		{"wrong method, public path", "POST", "/healthz", false, "", 405},
		{"malformed JSON", "POST", "/v1/sessions", true, "{", 400},
		{"empty body", "POST", "/v1/sessions", true, "", 400},
		{"call without id", "POST", "/v1/sessions/s1/turns", true, `{"calls":[{"name":"x"}]}`, 422},
		{"unknown mode", "POST", "/v1/sessions/s1/turns", true, `{"calls":[],"mode":"sideways"}`, 422},
		{"body too large", "POST", "/v1/sessions", true, `{"metadata":"` + strings.Repeat("x", 2<<10) + `"}`, 413},
		{"ledger limit 0", "GET", "/v1/sessions/s1/ledger?limit=0", true, "", 400},
		{"ledger after -1", "GET", "/v1/sessions/s1/ledger?after=-1", true, "", 400},
		{"ledger limit not a number", "GET", "/v1/sessions/s1/ledger?limit=ten", true, "", 400},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			req := testRequest(t, tt.method, tt.path, tt.body)
			if tt.method == "POST" {
				req.Header.Set("Content-Type", "application/json")
			}
			if tt.token {
				req.Header.Set("Authorization", "Bearer secret")
			}
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if _, err := io.Copy(io.Discard, resp.Body); err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tt.wantStatus {
				t.Errorf("status %d, want %d", resp.StatusCode, tt.wantStatus)
			}
		})
	}
}

// testKey has the form of a completion key (no server issued it).
const testKey = "ck_UNhY4JhezH9gQYqvDMWrWH9CwlcKiECVqejMrND2VFw"

// TestContractCheckerOnSignedCompletions runs the checker over the
// completion endpoints of a server with a signing secret: unsigned and
// badly signed requests are refused 401 bad_signature, a signed one gets
// past the signature (to the store-less 404).
func TestContractCheckerOnSignedCompletions(t *testing.T) {
	t.Parallel()
	signer, err := completion.NewSigner("whsec_" + base64.StdEncoding.EncodeToString([]byte("contract-test-signing-key-32-byt")))
	if err != nil {
		t.Fatal(err)
	}
	h := newHandlerOver(t, unknownKeysStore{}, api.Config{Tokens: []string{"secret"}, CompletionSigner: signer})
	client := &http.Client{Transport: newContractChecker(t).Transport(inProcess(h))}

	const body = `{"output":"done"}`
	tests := []struct {
		name       string
		path       string
		body       string
		headers    map[string]string
		wantStatus int
	}{
		{"unsigned delivery", "/v1/complete/" + testKey, body, nil, 401},
		{"badly signed delivery", "/v1/complete/" + testKey, body, signer.Headers("msg_1", time.Now(), []byte(`{"output":"other"}`)), 401},
		{"stale signature", "/v1/complete/" + testKey, body, signer.Headers("msg_1", time.Now().Add(-time.Hour), []byte(body)), 401},
		{"signed delivery", "/v1/complete/" + testKey, body, signer.Headers("msg_1", time.Now(), []byte(body)), 404},
		{"unsigned heartbeat", "/v1/complete/" + testKey + "/heartbeat", "", nil, 401},
		{"signed heartbeat", "/v1/complete/" + testKey + "/heartbeat", "", signer.Headers("msg_2", time.Now(), nil), 404},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var rb io.Reader
			if tt.body != "" {
				rb = strings.NewReader(tt.body)
			}
			req, err := http.NewRequestWithContext(t.Context(), "POST", "http://turnd.test"+tt.path, rb)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			for k, v := range tt.headers {
				req.Header.Set(k, v)
			}
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var p struct {
				Code string `json:"code"`
			}
			if err := json.NewDecoder(resp.Body).Decode(&p); err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tt.wantStatus {
				t.Errorf("status %d (%s), want %d", resp.StatusCode, p.Code, tt.wantStatus)
			}
			if tt.wantStatus == 401 && p.Code != "bad_signature" {
				t.Errorf("code %q, want bad_signature", p.Code)
			}
		})
	}
}

// recordingTB records what a checker reports instead of failing the test.
type recordingTB struct {
	testing.TB
	mu     sync.Mutex
	errors []string
}

func (r *recordingTB) Helper() {}

func (r *recordingTB) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

// turnJSON is a waiting turn whose results use every optional and nullable
// member of a result.
const turnJSON = `{
	"id": "t1", "session_id": "s1", "status": "waiting", "mode": "ordered", "failure_policy": "isolate",
	"created_at": "2025-01-02T03:04:05Z", "settled_at": null,
	"results": [
		{"call_id": "c1", "name": "read_file", "status": "ok", "output": "text", "truncated": true,
		 "original_bytes": 40960, "original_lines": 812, "output_id": "out_1", "attempts": 1,
		 "started_at": "2025-01-02T03:04:05Z", "finished_at": "2025-01-02T03:04:05Z"},
		{"call_id": "c2", "name": "search", "status": "refused", "output": null,
		 "error": {"code": "tool_not_granted", "message": "tool \"search\" is not granted to this session"},
		 "truncated": false, "original_bytes": 0, "original_lines": 0, "attempts": 0,
		 "started_at": null, "finished_at": null},
		{"call_id": "c3", "name": "lookup", "status": "ok", "output": {"rows": [1, 2]}, "truncated": false,
		 "original_bytes": 14, "original_lines": 1, "attempts": 1, "replayed_from": "t0",
		 "started_at": "2025-01-02T03:04:05Z", "finished_at": "2025-01-02T03:04:05Z"},
		{"call_id": "c4", "name": "approve", "status": "pending", "output": null, "truncated": false,
		 "original_bytes": 0, "original_lines": 0, "attempts": 1,
		 "started_at": "2025-01-02T03:04:05Z", "finished_at": null}
	]
}`

// TestContractCheckerCatchesMismatches feeds the checker canned answers
// that break the document and requires a report naming the mismatch; the
// valid answers among them must pass without one.
func TestContractCheckerCatchesMismatches(t *testing.T) {
	t.Parallel()
	const session = `{"id":"s1","tools":null,"budget":{"limit":16384,"max_lines":400,"mode":"bytes","window":"head_tail","head_share":0.5},"callback_url":null,"metadata":null,"created_at":"2025-01-02T03:04:05Z"}`
	problem := func(status int, code string) string {
		return fmt.Sprintf(`{"type":"urn:turnd:problem:%s","title":%q,"status":%d,"code":%q}`, code, http.StatusText(status), status, code)
	}

	tests := []struct {
		name        string
		method      string
		path        string
		body        string
		status      int
		contentType string
		respBody    string
		header      map[string]string
		want        string // substring of the report; "" wants none
	}{
		{
			name: "valid session", method: "GET", path: "/v1/sessions/s1",
			status: 200, contentType: "application/json", respBody: session,
		},
		{
			name: "valid waiting turn", method: "GET", path: "/v1/sessions/s1/turns/t1",
			status: 200, contentType: "application/json", respBody: turnJSON,
		},
		{
			name: "valid ledger page", method: "GET", path: "/v1/sessions/s1/ledger?after=3&limit=2",
			status: 200, contentType: "application/json",
			respBody: `{"lines":[{"seq":4,"turn_id":"t1","call_id":null,"kind":"turn_settled","at":"2025-01-02T03:04:05.123456Z","data":{"status":"completed"}}],"next_after":4}`,
		},
		{
			name: "unknown ledger kind", method: "GET", path: "/v1/sessions/s1/ledger",
			status: 200, contentType: "application/json",
			respBody: `{"lines":[{"seq":1,"turn_id":"t1","call_id":null,"kind":"call_teleported","at":"2025-01-02T03:04:05Z","data":{}}],"next_after":1}`,
			want:     "kind",
		},
		{
			name: "undocumented status", method: "GET", path: "/v1/sessions/s1",
			status: 418, contentType: "application/json", respBody: `{}`,
			want: "status 418 is not documented",
		},
		{
			name: "missing required field", method: "GET", path: "/v1/sessions/s1",
			status: 200, contentType: "application/json", respBody: strings.Replace(session, `"callback_url":null,`, "", 1),
			want: "callback_url",
		},
		{
			name: "time not in UTC", method: "GET", path: "/v1/sessions/s1",
			status: 200, contentType: "application/json", respBody: strings.Replace(session, "03:04:05Z", "03:04:05+01:00", 1),
			want: "created_at",
		},
		{
			name: "wrong problem code", method: "GET", path: "/v1/sessions/s1",
			status: 404, contentType: problemJSON, respBody: problem(404, "gone"),
			want: "code",
		},
		{
			name: "problem status member differs", method: "GET", path: "/v1/outputs/o1",
			status: 404, contentType: problemJSON, respBody: strings.Replace(problem(404, "not_found"), `"status":404`, `"status":400`, 1),
			want: "status member",
		},
		{
			name: "error as JSON instead of problem", method: "GET", path: "/v1/sessions/s1",
			status: 404, contentType: "application/json", respBody: `{"error":"not found"}`,
			want: "application/json",
		},
		{
			name: "503 without Retry-After", method: "GET", path: "/v1/sessions/s1",
			status: 503, contentType: problemJSON, respBody: problem(503, "store_unavailable"),
			want: "Retry-After",
		},
		{
			name: "503 with Retry-After", method: "GET", path: "/v1/sessions/s1",
			status: 503, contentType: problemJSON, respBody: problem(503, "store_unavailable"),
			header: map[string]string{"Retry-After": "2"},
		},
		{
			name: "raw output body is not validated", method: "GET", path: "/v1/outputs/o1",
			status: 200, contentType: "text/plain; charset=utf-8", respBody: "line 1\nline 2\n",
		},
		{
			name: "invalid request accepted", method: "GET", path: "/v1/sessions/s1/ledger?limit=0",
			status: 200, contentType: "application/json", respBody: `{"lines":[],"next_after":0}`,
			want: "a 4xx answer was expected",
		},
		{
			name: "invalid request refused", method: "POST", path: "/v1/sessions/s1/turns", body: `{"calls":[{"name":"x"}]}`,
			status: 422, contentType: problemJSON, respBody: problem(422, "invalid_request"),
		},
		{
			name: "unknown path answered 200", method: "GET", path: "/v2/things",
			status: 200, contentType: "application/json", respBody: `{}`,
			want: "so 404 was expected",
		},
		{
			name: "unknown path answered 404", method: "GET", path: "/v2/things",
			status: 404, contentType: problemJSON, respBody: problem(404, "not_found"),
		},
		{
			name: "wrong method answered 404", method: "PUT", path: "/v1/tools",
			status: 404, contentType: problemJSON, respBody: problem(404, "not_found"),
			want: "so 405 was expected",
		},
		{
			name: "unknown /v1 path answered 401", method: "GET", path: "/v1/nope",
			status: 401, contentType: problemJSON, respBody: problem(401, "unauthorized"),
			header: map[string]string{"WWW-Authenticate": `Bearer realm="turnd"`},
			want:   "so 404 was expected",
		},
		{
			name: "valid cancelled turn", method: "POST", path: "/v1/sessions/s1/turns/t1/cancel",
			status: 200, contentType: "application/json", respBody: strings.Replace(turnJSON, `"status": "waiting"`, `"status": "cancelled"`, 1),
		},
		{
			name: "valid turn_busy", method: "POST", path: "/v1/sessions/s1/turns/t1/cancel",
			status: 409, contentType: problemJSON, respBody: problem(409, "turn_busy"),
		},
		{
			name: "valid provider rendering", method: "GET", path: "/v1/sessions/s1/turns/t1?format=openai.chat",
			status: 200, contentType: "application/json", respBody: `[{"role":"tool","tool_call_id":"c","content":"ok"}]`,
		},
		{
			name: "provider rendering without content", method: "GET", path: "/v1/sessions/s1/turns/t1?format=openai.chat",
			status: 200, contentType: "application/json", respBody: `[{"role":"tool","tool_call_id":"c"}]`,
			want: "content",
		},
		{
			name: "turn answered 201", method: "GET", path: "/v1/sessions/s1/turns/t1",
			status: 201, contentType: "application/json", respBody: turnJSON, header: map[string]string{"Preference-Applied": "wait=5"},
			want: "status 201 is not documented",
		},
		{
			name: "valid completion info", method: "GET", path: "/v1/complete/" + testKey,
			status: 200, contentType: "application/json", respBody: `{"status":"issued","deadline":null,"heartbeat_deadline":null}`,
		},
		{
			name: "unknown completion status", method: "GET", path: "/v1/complete/" + testKey,
			status: 200, contentType: "application/json", respBody: `{"status":"lost","deadline":null,"heartbeat_deadline":null}`,
			want: "status",
		},
		{
			name: "valid delivery ack", method: "POST", path: "/v1/complete/" + testKey, body: `{"output":null,"error":null}`,
			status: 200, contentType: "application/json", respBody: `{"status":"already_completed"}`,
		},
		{
			name: "valid completion_gone", method: "POST", path: "/v1/complete/" + testKey, body: `{"error":{"code":"x"}}`,
			status: 410, contentType: problemJSON, respBody: strings.Replace(problem(410, "completion_gone"), "}", `,"recorded_status":"timed_out"}`, 1),
		},
		{
			name: "completion_gone without recorded_status", method: "POST", path: "/v1/complete/" + testKey, body: `{"output":1}`,
			status: 410, contentType: problemJSON, respBody: problem(410, "completion_gone"),
			want: "recorded_status",
		},
		{
			name: "completion 401 that is not bad_signature", method: "POST", path: "/v1/complete/" + testKey, body: `{"output":1}`,
			status: 401, contentType: problemJSON, respBody: problem(401, "unauthorized"),
			want: "code",
		},
		{
			name: "empty delivery accepted", method: "POST", path: "/v1/complete/" + testKey, body: `{}`,
			status: 200, contentType: "application/json", respBody: `{"status":"accepted"}`,
			want: "a 4xx answer was expected",
		},
		{
			name: "delivery of output and error accepted", method: "POST", path: "/v1/complete/" + testKey, body: `{"output":1,"error":{"code":"x"}}`,
			status: 200, contentType: "application/json", respBody: `{"status":"accepted"}`,
			want: "a 4xx answer was expected",
		},
		{
			name: "delivery of error and null output accepted", method: "POST", path: "/v1/complete/" + testKey, body: `{"error":{"code":"x"},"output":null}`,
			status: 200, contentType: "application/json", respBody: `{"status":"accepted"}`,
			want: "a 4xx answer was expected",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rec := &recordingTB{TB: t}
			c := newContractChecker(rec)
			canned := roundTripFunc(func(req *http.Request) (*http.Response, error) {
				if req.Body != nil {
					_, _ = io.Copy(io.Discard, req.Body)
					_ = req.Body.Close()
				}
				h := http.Header{"Content-Type": {tt.contentType}}
				for k, v := range tt.header {
					h.Set(k, v)
				}
				return &http.Response{
					StatusCode: tt.status, Header: h, Request: req,
					Body: io.NopCloser(strings.NewReader(tt.respBody)), ContentLength: int64(len(tt.respBody)),
				}, nil
			})
			req := testRequest(t, tt.method, tt.path, tt.body)
			req.Header.Set("Authorization", "Bearer any")
			if tt.body != "" {
				req.Header.Set("Content-Type", "application/json")
			}
			resp, err := c.Transport(canned).RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(resp.Body)
			if err != nil || string(got) != tt.respBody {
				t.Errorf("the caller's body is %q (%v), want %q", got, err, tt.respBody)
			}
			reports := strings.Join(rec.errors, "\n")
			switch {
			case tt.want == "" && reports != "":
				t.Errorf("unexpected report:\n%s", reports)
			case tt.want != "" && !strings.Contains(reports, tt.want):
				t.Errorf("report %q does not mention %q", reports, tt.want)
			}
		})
	}
}

// Streamed request bodies are documented as strings (their grammar is the
// provider's event stream or NDJSON, which a schema cannot state).
func init() {
	text := func(body io.Reader, _ http.Header, _ *openapi3.SchemaRef, _ openapi3filter.EncodingFn) (any, error) {
		b, err := io.ReadAll(body)
		return string(b), err
	}
	openapi3filter.RegisterBodyDecoder("text/event-stream", text)
	openapi3filter.RegisterBodyDecoder("application/x-ndjson", text)
}

// testRequest is a request to turnd.test of method, path and body (none
// when empty), bound to the test's context.
func testRequest(t *testing.T, method, path, body string) *http.Request {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, "http://turnd.test"+path, r)
	if err != nil {
		t.Fatal(err)
	}
	return req
}
