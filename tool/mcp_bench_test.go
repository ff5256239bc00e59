package tool

import (
	"context"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/turnd/turnd/dispatch"
)

// BenchmarkMCPInvoke measures one tools/call through an MCP tool to an SDK
// server on loopback (text result), sequential and in parallel on one
// session.
func BenchmarkMCPInvoke(b *testing.B) {
	rig := &mcpRig{tb: b}
	rig.server = mcp.NewServer(&mcp.Implementation{Name: "bench", Version: "1"}, nil)
	rig.addTool(&mcp.Tool{Name: "echo"}, textResult("ok"))
	rig.start("127.0.0.1:0")
	b.Cleanup(rig.stop)
	l, _ := openLive(b, mcpConfig(rig.url(), ""), nil)
	s, _ := l.Registry().Lookup("echo")
	ctx := WithCallContext(context.Background(), CallContext{SessionID: "s", TurnID: "t"})
	call := dispatch.Call{ID: "c", Name: "echo"}
	b.Run("sequential", func(b *testing.B) {
		for b.Loop() {
			if out := s.Impl.Invoke(ctx, call, nil); out.Status != dispatch.StatusOK {
				b.Fatalf("%+v", out.Err)
			}
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if out := s.Impl.Invoke(ctx, call, nil); out.Status != dispatch.StatusOK {
					b.Errorf("%+v", out.Err)
					return
				}
			}
		})
	})
}
