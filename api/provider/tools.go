package provider

import "encoding/json"

// Tool is a tool definition as the providers' requests declare it.
type Tool struct {
	Name        string
	Description string
	// InputSchema is the JSON Schema of the arguments; nil is any object.
	InputSchema json.RawMessage
}

type chatFunction struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters"`
}

type chatTool struct {
	Type     string       `json:"type"`
	Function chatFunction `json:"function"`
}

type responsesTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters"`
	// Strict is false: strict mode demands schemas (every property
	// required, additionalProperties false) that turnd's tools need not have.
	Strict bool `json:"strict"`
}

type anthropicTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// Tools renders tool definitions as the format's `tools` request
// parameter, an array in the given order:
//
//   - openai.chat: {"type":"function","function":{"name","description","parameters"}};
//   - openai.responses: {"type":"function","name","description","parameters","strict":false};
//   - anthropic.messages: {"name","description","input_schema"}.
func (f Format) Tools(tools []Tool) any {
	switch f {
	case OpenAIChat:
		out := make([]chatTool, len(tools))
		for i, t := range tools {
			out[i] = chatTool{Type: "function", Function: chatFunction{Name: t.Name, Description: t.Description, Parameters: schemaOf(t)}}
		}
		return out
	case OpenAIResponses:
		out := make([]responsesTool, len(tools))
		for i, t := range tools {
			out[i] = responsesTool{Type: "function", Name: t.Name, Description: t.Description, Parameters: schemaOf(t)}
		}
		return out
	default:
		out := make([]anthropicTool, len(tools))
		for i, t := range tools {
			out[i] = anthropicTool{Name: t.Name, Description: t.Description, InputSchema: schemaOf(t)}
		}
		return out
	}
}

func schemaOf(t Tool) json.RawMessage {
	if len(t.InputSchema) == 0 {
		return json.RawMessage(`{"type":"object"}`)
	}
	return t.InputSchema
}
