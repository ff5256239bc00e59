package tool

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/turnd/turnd/dispatch"
)

// list reads every page of tools/list.
func (s *mcpServer) list(ctx context.Context, sess *mcp.ClientSession) ([]*mcp.Tool, error) {
	if ir := sess.InitializeResult(); ir != nil && ir.Capabilities != nil && ir.Capabilities.Tools == nil {
		return nil, nil // a server without tools
	}
	var tools []*mcp.Tool
	for t, err := range sess.Tools(ctx, nil) {
		if err != nil {
			return nil, err
		}
		if len(tools) == MaxMCPTools {
			s.log.Warn("MCP server lists more tools than turnd imports; the rest are left out", "max", MaxMCPTools)
			break
		}
		tools = append(tools, t)
	}
	return tools, nil
}

// setTools records a listing and reports whether it changed anything.
func (s *mcpServer) setTools(tools []*mcp.Tool) bool {
	js, err := json.Marshal(tools)
	if err != nil {
		js = nil // compares unequal to any listing: rebuild
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tools != nil && js != nil && bytes.Equal(js, s.listed) {
		return false
	}
	if tools == nil {
		tools = []*mcp.Tool{}
	}
	s.tools, s.listed = tools, js
	s.specs = s.buildSpecs()
	s.log.Info("MCP tools listed", "count", len(s.specs))
	return true
}

// reconfigure takes a reloaded entry with the same key (url and headers):
// prefix, trust, timeout and retry may have changed.
func (s *mcpServer) reconfigure(src *mcpSource) {
	s.mu.Lock()
	defer s.mu.Unlock()
	src.caps = s.src.caps.keep(src.caps)
	s.src = src
	if s.tools != nil {
		s.specs = s.buildSpecs()
	}
}

// currentSpecs are the specs of the tools last listed.
func (s *mcpServer) currentSpecs() []*Spec {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.specs
}

// buildSpecs makes the specs of s.tools under s.src (s.mu held). A tool
// whose name (prefix included) is not a turnd tool name, or whose input
// schema turnd cannot compile, is left out with a warning: turnd does not
// rename tools, since the model would call names the server does not know.
func (s *mcpServer) buildSpecs() []*Spec {
	src := s.src
	specs := make([]*Spec, 0, len(s.tools))
	seen := map[string]bool{}
	for _, t := range s.tools {
		if t == nil {
			continue
		}
		name := src.prefix + t.Name
		skip := func(why string, args ...any) {
			s.log.Warn("MCP tool left out: "+fmt.Sprintf(why, args...), "mcp_tool", t.Name)
		}
		switch {
		case !namePattern.MatchString(name):
			skip("its turnd name %q does not match %s", name, namePattern)
			continue
		case name == dispatch.MetaTool:
			skip("its turnd name %q is reserved", name)
			continue
		case seen[name]:
			skip("the server lists %q twice", t.Name)
			continue
		}
		seen[name] = true
		sp := &Spec{Name: name, Description: t.Description, Effect: dispatch.EffectWrite, Retry: src.retry, Projection: src.projection,
			Impl: &mcpTool{srv: s, remote: t.Name, timeout: src.timeout}}
		if sp.Description == "" {
			sp.Description = t.Title
		}
		sp.Approval, sp.Hints = src.approval, &Hints{}
		if a := t.Annotations; src.trust && a != nil {
			if a.ReadOnlyHint {
				sp.Effect = dispatch.EffectRead
			}
			sp.Idempotent = a.ReadOnlyHint || a.IdempotentHint
			// Untrusted or missing annotations keep the MCP defaults
			// (destructive, open world): a rule over them asks for more
			// approvals, never fewer.
			ro, idem := a.ReadOnlyHint, a.IdempotentHint
			sp.Hints = &Hints{ReadOnly: &ro, Destructive: a.DestructiveHint, Idempotent: &idem, OpenWorld: a.OpenWorldHint}
		}
		if t.InputSchema != nil {
			js, err := json.Marshal(t.InputSchema)
			if err == nil {
				err = sp.CompileSchema(js)
			}
			if err != nil {
				skip("turnd cannot use its input schema: %v", err)
				continue
			}
		}
		if !s.resourcesOf(sp, t.Name, skip) {
			continue
		}
		src.caps.apply(sp)
		specs = append(specs, sp)
	}
	return specs
}
