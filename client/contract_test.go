package client

import (
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"
)

// The client's wire types are written by hand and held to openapi.yaml
// here: every property of a schema is a field with that JSON name and
// every field is a property (both ways), a required property of an answer
// is never omitted, and every operation has its method.

// schemaTypes maps each object schema of openapi.yaml to its Go type.
var schemaTypes = map[string]any{
	"Problem":           Error{},
	"BudgetRequest":     BudgetRequest{},
	"Budget":            Budget{},
	"SessionRequest":    SessionRequest{},
	"Session":           Session{},
	"Call":              Call{},
	"TurnRequest":       TurnRequest{},
	"Turn":              Turn{},
	"Result":            Result{},
	"CallError":         CallError{},
	"Delivery":          Delivery{},
	"DeliveryError":     DeliveryError{},
	"DeliveryAck":       DeliveryAck{},
	"CompletionInfo":    CompletionInfo{},
	"LedgerLine":        LedgerLine{},
	"LedgerPage":        LedgerPage{},
	"Tool":              Tool{},
	"ToolList":          ToolList{},
	"Health":            Health{},
	"Readiness":         Readiness{},
	"SessionPage":       SessionPage{},
	"SessionSummary":    SessionSummary{},
	"TurnPage":          TurnPage{},
	"TurnSummary":       TurnSummary{},
	"PendingPage":       PendingPage{},
	"ParkedCall":        ParkedCall{},
	"Progress":          Progress{},
	"CallProgressEvent": ProgressEvent{},
	"Approval":          Approval{},
	"ApprovalPage":      ApprovalPage{},
	"Decision":          Decision{},
	"DecisionResult":    DecisionResult{},
}

// notYetInSpec are client types and operations openapi.yaml does not have
// yet (checked as soon as it has them); none now.
var notYetInSpec = []string{}

// providerSchemas are the provider formats' shapes: the client takes and
// answers the official SDKs' own types for them.
var providerSchemas = []string{
	"ProviderTurn", "OpenAIChatCompletion", "OpenAIChatAssistantMessage", "OpenAIResponse",
	"OpenAIResponseOutput", "AnthropicMessage", "ProviderResults", "ProviderTools",
}

// rawSchemas the client passes through as JSON (json.RawMessage), for the
// caller to write or read: approval policies, whose grammar is the server's.
var rawSchemas = []string{"ApprovalPolicy", "ApprovalRule"}

// sentSchemas are what turnd sends to others (the turn.settled webhook's
// body, the HTTP tool and cancel protocols), not what the client reads or
// sends; api's TestSentMessagesMatchSpec holds turnd to them.
var sentSchemas = []string{
	"TurnSettledEvent", "ToolRequest", "ToolCompletion", "ToolResponse", "ToolError", "ToolPending", "CancelRequest",
	"ToolProgressLine", "ApprovalRequestedEvent",
}

// requestTypes are sent, not received: their optional fields may be
// omitted.
var requestTypes = []string{"BudgetRequest", "SessionRequest", "Call", "TurnRequest", "Delivery", "DeliveryError", "Decision"}

// operationMethods maps each operationId to the method that calls it.
var operationMethods = map[string]string{
	"getHealth":                "Health",
	"getReadiness":             "Ready",
	"getOpenAPI":               "OpenAPI",
	"createSession":            "CreateSession",
	"getSession":               "Session",
	"postTurn":                 "PostTurn", // and PostProviderJSON (and package sdk's PostChatCompletion, PostResponse, PostMessage)
	"getTurn":                  "Turn",     // and Await, ProviderResults
	"getTurnEvents":            "Events",
	"cancelTurn":               "CancelTurn",
	"getLedger":                "LedgerPage", // and Ledger
	"getOutput":                "Output",
	"listTools":                "Tools",
	"deliverCompletion":        "Deliver", // and Complete, CompleteError, DeliverRaw, DecideKey
	"getCompletion":            "CompletionStatus",
	"heartbeatCompletion":      "Heartbeat",
	"reportCompletionProgress": "ReportProgress",
	"listSessions":             "SessionsPage", // and Sessions
	"listTurns":                "TurnsPage",    // and Turns
	"listPending":              "PendingPage",  // and Pending
	"getTurnCalls":             "TurnCalls",
	"listApprovals":            "ApprovalsPage", // and Approvals
	"decideCall":               "Decide",
}

// leftOut are the operations the client does not call, and why.
var leftOut = map[string]string{
	"getMetrics": "Prometheus scrapes it; it is no part of an integration",
}

type spec struct {
	Paths      map[string]map[string]any `yaml:"paths"`
	Components struct {
		Schemas map[string]schema `yaml:"schemas"`
	} `yaml:"components"`
}

type schema struct {
	Type       any            `yaml:"type"`
	Required   []string       `yaml:"required"`
	Properties map[string]any `yaml:"properties"`
	OneOf      []schema       `yaml:"oneOf"`
	AllOf      []schema       `yaml:"allOf"`
	Ref        string         `yaml:"$ref"`
	AnyOf      []schema       `yaml:"anyOf"`
	Items      *schema        `yaml:"items"`
	Extra      map[string]any `yaml:",inline"`
}

func loadSpec(t *testing.T) spec {
	t.Helper()
	data, err := os.ReadFile("../openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var s spec
	if err := yaml.Unmarshal(data, &s); err != nil {
		t.Fatalf("openapi.yaml: %v", err)
	}
	return s
}

// properties are a schema's property names, those of its oneOf branches
// and allOf parts included, and its required ones (required in every
// oneOf branch; those of every allOf part).
func (s schema) properties(all map[string]schema) (props, required []string) {
	if name, ok := strings.CutPrefix(s.Ref, "#/components/schemas/"); ok {
		return all[name].properties(all)
	}
	for p := range s.Properties {
		props = append(props, p)
	}
	required = append(required, s.Required...)
	for _, part := range s.AllOf {
		pp, pr := part.properties(all)
		props = append(props, pp...)
		required = append(required, pr...)
	}
	for _, b := range s.OneOf {
		bp, _ := b.properties(all)
		for _, p := range bp {
			if !slices.Contains(props, p) {
				props = append(props, p)
			}
		}
	}
	slices.Sort(props)
	return props, required
}

// jsonFields are a struct type's JSON names, and those it omits when empty.
func jsonFields(typ reflect.Type) (names, omitempty []string) {
	for f := range typ.Fields() {
		tag := f.Tag.Get("json")
		if f.Anonymous && tag == "" {
			n, o := jsonFields(f.Type)
			names, omitempty = append(names, n...), append(omitempty, o...)
			continue
		}
		if tag == "-" || !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if name == "" {
			name = f.Name
		}
		names = append(names, name)
		if strings.Contains(opts, "omitempty") || strings.Contains(opts, "omitzero") {
			omitempty = append(omitempty, name)
		}
	}
	slices.Sort(names)
	return names, omitempty
}

func TestContract(t *testing.T) {
	t.Parallel()
	s := loadSpec(t)
	for name, sch := range s.Components.Schemas {
		if len(sch.Properties) == 0 && len(sch.OneOf) == 0 && len(sch.AllOf) == 0 {
			continue // a scalar or an enum
		}
		if slices.Contains(providerSchemas, name) || slices.Contains(sentSchemas, name) || slices.Contains(rawSchemas, name) {
			continue
		}
		if _, ok := schemaTypes[name]; !ok {
			t.Errorf("schema %s has no Go type in the client (add it to schemaTypes, or to providerSchemas or sentSchemas with a reason)", name)
		}
	}
	for name, v := range schemaTypes {
		t.Run(name, func(t *testing.T) {
			sch, ok := s.Components.Schemas[name]
			if !ok && slices.Contains(notYetInSpec, name) {
				t.Skipf("openapi.yaml has no schema %s yet", name)
			}
			if !ok {
				t.Fatalf("openapi.yaml has no schema %s", name)
			}
			props, required := sch.properties(s.Components.Schemas)
			slices.Sort(props)
			props = slices.Compact(props)
			fields, omitted := jsonFields(reflect.TypeOf(v))
			for _, p := range props {
				if !slices.Contains(fields, p) {
					t.Errorf("property %q of %s has no field in %T", p, name, v)
				}
			}
			for _, f := range fields {
				if !slices.Contains(props, f) {
					t.Errorf("field %q of %T is not a property of %s", f, v, name)
				}
			}
			if !slices.Contains(requestTypes, name) {
				for _, r := range required {
					if slices.Contains(omitted, r) {
						t.Errorf("%T omits %q when empty, but %s requires it", v, r, name)
					}
				}
			}
		})
	}
	for name := range schemaTypes {
		if slices.Contains(providerSchemas, name) || slices.Contains(sentSchemas, name) {
			t.Errorf("%s is both a client type and a provider or sent schema", name)
		}
	}
}

func TestEveryOperationHasAMethod(t *testing.T) {
	t.Parallel()
	s := loadSpec(t)
	typ := reflect.TypeOf(&Client{})
	seen := map[string]bool{}
	for path, ops := range s.Paths {
		for method, op := range ops {
			m, ok := op.(map[string]any)
			if !ok || method == "parameters" {
				continue
			}
			id, _ := m["operationId"].(string)
			seen[id] = true
			if _, ok := leftOut[id]; ok {
				continue
			}
			name, ok := operationMethods[id]
			if !ok {
				t.Errorf("%s %s (%s) has no client method", strings.ToUpper(method), path, id)
				continue
			}
			if _, ok := typ.MethodByName(name); !ok {
				t.Errorf("%s: the client has no method %s", id, name)
			}
		}
	}
	for id := range operationMethods {
		if !seen[id] && !slices.Contains(notYetInSpec, id) {
			t.Errorf("operationMethods names %s, which openapi.yaml does not have", id)
		}
	}
}
