package deploy

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"
)

// TestComposeTracingProfile checks the shape of the optional tracing
// profile (it is not run here): a collector and Jaeger only in profile
// tracing, the collector's config forwarding OTLP to Jaeger, and turnd's
// replicas exporting only when OTEL_EXPORTER_OTLP_ENDPOINT is given.
func TestComposeTracingProfile(t *testing.T) {
	t.Parallel()
	c, err := loadCompose("compose")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"otel-collector", "jaeger"} {
		s, ok := c.services[name]
		if !ok {
			t.Fatalf("no service %s", name)
		}
		if !slices.Equal(stringList(s.raw["profiles"]), []string{"tracing"}) {
			t.Errorf("%s: profiles %v, want [tracing]", name, s.raw["profiles"])
		}
		if img := s.image(); img == "" || strings.HasSuffix(img, ":latest") || !strings.Contains(img, ":") {
			t.Errorf("%s: image %q, want one pinned by tag", name, img)
		}
	}
	for _, n := range c.names {
		s := c.services[n]
		if !isTurnd(s) {
			continue
		}
		if got := s.env()["OTEL_EXPORTER_OTLP_ENDPOINT"]; got != "${OTEL_EXPORTER_OTLP_ENDPOINT:-}" {
			t.Errorf("%s: OTEL_EXPORTER_OTLP_ENDPOINT %q: tracing must stay off unless asked for", n, got)
		}
		for dep := range s.dependsOn() {
			if dep == "otel-collector" || dep == "jaeger" {
				t.Errorf("%s depends on %s, which runs only in the tracing profile", n, dep)
			}
		}
	}
	data, err := os.ReadFile(filepath.Join("compose", "otel", "collector.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var col struct {
		Receivers map[string]struct {
			Protocols map[string]struct{ Endpoint string } `yaml:"protocols"`
		} `yaml:"receivers"`
		Exporters map[string]struct{ Endpoint string } `yaml:"exporters"`
		Service   struct {
			Pipelines map[string]struct{ Receivers, Exporters []string } `yaml:"pipelines"`
		} `yaml:"service"`
	}
	if err := yaml.Unmarshal(data, &col); err != nil {
		t.Fatal(err)
	}
	if ep := col.Receivers["otlp"].Protocols["http"].Endpoint; !strings.HasSuffix(ep, ":4318") {
		t.Errorf("the collector's OTLP/HTTP receiver listens on %q, want port 4318 (turnd exports http/protobuf)", ep)
	}
	p := col.Service.Pipelines["traces"]
	if !slices.Contains(p.Receivers, "otlp") || len(p.Exporters) != 1 || col.Exporters[p.Exporters[0]].Endpoint != "jaeger:4317" {
		t.Errorf("traces pipeline %+v (exporters %+v): want otlp in, Jaeger's OTLP port out", p, col.Exporters)
	}
}
