package api

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/go-chi/chi/v5"
)

// TestRoutePatternCached: the cached route pattern is chi's, for routes
// under one, two and three routers, unmatched paths and wildcards, asked
// twice (the second answer from the cache).
func TestRoutePatternCached(t *testing.T) {
	t.Parallel()
	var got, want []string
	record := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := chi.RouteContext(r.Context())
		got, want = append(got, routePattern(rc)), append(want, rc.RoutePattern())
	})
	inner := chi.NewRouter()
	inner.Get("/{id}", record)
	inner.Get("/{id}/x/*", record)
	mid := chi.NewRouter()
	mid.Mount("/inner", inner)
	mid.Post("/complete/{key}", record)
	mid.NotFound(record)
	root := chi.NewRouter()
	root.Mount("/v1", mid)
	root.Get("/", record)
	root.Get("/healthz", record)
	root.NotFound(record)
	paths := []string{"/", "/healthz", "/v1/inner/a", "/v1/inner/b", "/v1/inner/a/x/y/z", "/v1/nope", "/nope", "/v1/complete/k1"}
	for range 2 {
		for _, p := range paths {
			method := http.MethodGet
			if p == "/v1/complete/k1" {
				method = http.MethodPost
			}
			root.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(method, p, nil))
		}
	}
	if len(got) != 2*len(paths) {
		t.Fatalf("%d requests recorded, want %d", len(got), 2*len(paths))
	}
	for i := range got {
		if got[i] != want[i] {
			t.Errorf("%s: route pattern %q, chi's %q", paths[i%len(paths)], got[i], want[i])
		}
	}
}
