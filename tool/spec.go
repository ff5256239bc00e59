package tool

import (
	"context"
	"encoding/json"
	"net/http"
	"sort"
	"time"

	"github.com/turnd/turnd/budget"
	"github.com/turnd/turnd/completion"
	"github.com/turnd/turnd/dispatch"
)

// Spec is one registered tool.
type Spec struct {
	Name        string
	Description string
	Effect      dispatch.Effect
	// Idempotent tools may run again after a crash interrupted an attempt
	// whose write-ahead line was committed; others get the error
	// "interrupted" instead.
	Idempotent bool
	// InputSchema is the JSON Schema of the arguments (nil: any object).
	InputSchema json.RawMessage
	Retry       dispatch.RetryPolicy
	// Impl runs the tool.
	Impl dispatch.Tool

	// Deferred tools may park a call on a completion key: an HTTP tool
	// then gets the key in its request and may answer {"pending": {...}}.
	Deferred bool
	// Pending are the tool's default pending options (config pending:);
	// empty fields fall back to the completion package's defaults. They
	// have passed completion.Options.Validate.
	Pending completion.Options
	// ResourceTemplates compute the resources a call touches (config
	// resource:); nil declares none, and the call conflicts with every
	// other (see dispatch.Admission.Resources).
	ResourceTemplates []Resource
	// Limit caps the calls of the tool (of its MCP server, shared by the
	// server's tools) running at once in this process, SessionLimit those
	// of one session; nil for no cap (config max_concurrency and
	// max_concurrency_per_session).
	Limit        *dispatch.Limit
	SessionLimit *dispatch.LimitSet

	// Projection refines the session's budget for this tool's outputs
	// (config projection:); zero leaves it as it is.
	Projection budget.Projection
	// Approval says which calls of the tool wait for a person's decision
	// before it runs (config approval:, or the config's default); nil
	// never asks. Hints are the tool's MCP annotations (nil for a tool
	// of the config's own, whose hints follow from effect and idempotent;
	// see Spec.NeedsApproval).
	Approval *Approval
	Hints    *Hints
	// CancelURL is where Registry.CancelExternal POSTs to cancel a parked
	// call's external work ("" when the tool has none). ${VAR} is already
	// expanded, so it may hold a secret: never log it.
	CancelURL string

	// validate checks decoded arguments against the compiled InputSchema;
	// nil when the spec has no (compiled) schema. See CompileSchema.
	validate func(args any) error
}

// Validate checks args against the tool's input schema. Missing or null
// arguments count as {}; arguments must be a JSON object even when the tool
// has no schema. Errors match ErrInvalidArguments and their message is fit
// for the model to read (e.g. "at /q: got number, want string").
func (s *Spec) Validate(args json.RawMessage) error {
	if s.validate == nil && isObject(args) {
		return nil // what decoding would find, without the decoding
	}
	v, err := decodeArguments(args)
	if err != nil {
		return err
	}
	if s.validate == nil {
		return nil
	}
	return s.validate(v)
}

// Registry is an immutable set of tools. A config reload builds a new one.
type Registry struct {
	byName map[string]*Spec
	names  []string
	// keyed: some tool declares resources.
	keyed bool

	owned *http.Client // the HTTP tools' client when the loader made it

	// Set by the config loader; CancelExternal falls back to defaults in a
	// registry built with NewRegistry.
	client        *http.Client     // the HTTP tools' client
	now           func() time.Time // signs cancel requests
	cancelBackoff time.Duration    // first wait between cancel attempts
}

// CloseIdleConnections closes the idle connections of the HTTP client the
// config loader made for this registry (none if Options.HTTPClient was
// given: its owner closes it). Call it once the registry's last call has
// finished, e.g. after a reload drained the old registry, and at shutdown.
func (r *Registry) CloseIdleConnections() {
	if r != nil && r.owned != nil {
		r.owned.CloseIdleConnections()
	}
}

// NewRegistry builds a registry; names must be unique (checked by the
// config loader, which reports the config line).
func NewRegistry(specs ...*Spec) *Registry {
	r := &Registry{byName: make(map[string]*Spec, len(specs))}
	for _, s := range specs {
		if _, dup := r.byName[s.Name]; dup {
			continue
		}
		r.byName[s.Name] = s
		r.names = append(r.names, s.Name)
		r.keyed = r.keyed || len(s.ResourceTemplates) > 0
	}
	sort.Strings(r.names)
	return r
}

// HasResources reports whether a tool of the registry declares resources.
func (r *Registry) HasResources() bool { return r != nil && r.keyed }

// Lookup returns the named tool.
func (r *Registry) Lookup(name string) (*Spec, bool) {
	if r == nil {
		return nil, false
	}
	s, ok := r.byName[name]
	return s, ok
}

// List returns every tool, sorted by name.
func (r *Registry) List() []*Spec {
	if r == nil {
		return nil
	}
	out := make([]*Spec, len(r.names))
	for i, n := range r.names {
		out[i] = r.byName[n]
	}
	return out
}

// Projected is an output a tool projected itself while reading it (a
// streamed HTTP body): the service uses it as is instead of projecting
// Outcome.Output. A tool returns it in dispatch.Outcome.Detail.
type Projected struct {
	Result budget.Result
	// Full holds the output up to the service's keep cap; Complete reports
	// whether it is the whole output.
	Full        []byte
	Complete    bool
	ContentType string
	// Stream is the projection's stream, when the service may ask it for
	// a projection within a lower limit (Stream.ResultWithin).
	Stream *budget.Stream
}

type projectorKey struct{}

// WithProjector returns a context carrying the session's budget projector
// and the cap on the bytes of a full output a tool should keep, so that a
// tool reading a stream can project it without holding all of it.
func WithProjector(ctx context.Context, p *budget.Projector, keepCap int64) context.Context {
	return context.WithValue(ctx, projectorKey{}, projectorValue{p, keepCap})
}

type projectorValue struct {
	p   *budget.Projector
	cap int64
}

// ProjectorFrom returns the projector and keep cap set by WithProjector.
func ProjectorFrom(ctx context.Context) (*budget.Projector, int64, bool) {
	v, ok := ctx.Value(projectorKey{}).(projectorValue)
	return v.p, v.cap, ok && v.p != nil
}
