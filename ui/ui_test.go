package ui_test

import (
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/turnd/turnd/ui"
)

func TestHandlerHeaders(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(ui.Handler())
	t.Cleanup(srv.Close)
	tests := []struct {
		method, path string
		status       int
		ctype        string
	}{
		{"GET", "/ui/", 200, "text/html; charset=utf-8"},
		{"GET", "/ui/app.js", 200, "text/javascript; charset=utf-8"},
		{"GET", "/ui/style.css", 200, "text/css; charset=utf-8"},
		{"GET", "/ui/nothing.js", 404, ""},
		{"POST", "/ui/", 405, ""},
	}
	for _, tt := range tests {
		req, _ := http.NewRequest(tt.method, srv.URL+tt.path, nil)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tt.status {
			t.Errorf("%s %s: %d, want %d", tt.method, tt.path, resp.StatusCode, tt.status)
		}
		if tt.ctype != "" && resp.Header.Get("Content-Type") != tt.ctype {
			t.Errorf("%s %s: Content-Type %q, want %q", tt.method, tt.path, resp.Header.Get("Content-Type"), tt.ctype)
		}
		csp := resp.Header.Get("Content-Security-Policy")
		for _, want := range []string{"default-src 'self'", "script-src 'self'", "frame-ancestors 'none'", "object-src 'none'"} {
			if !strings.Contains(csp, want) {
				t.Errorf("%s %s: Content-Security-Policy %q lacks %q", tt.method, tt.path, csp, want)
			}
		}
		if strings.Contains(csp, "unsafe-") {
			t.Errorf("%s %s: Content-Security-Policy allows %q", tt.method, tt.path, csp)
		}
		if got := resp.Header.Get("X-Content-Type-Options"); got != "nosniff" {
			t.Errorf("%s %s: X-Content-Type-Options %q", tt.method, tt.path, got)
		}
	}
}

// TestAssetsNeverParseHTML: the scripts never hand text to an HTML parser
// or to eval, and the page has no inline script or handler, nothing
// fetched from another origin.
func TestAssetsNeverParseHTML(t *testing.T) {
	t.Parallel()
	forbidden := regexp.MustCompile(`innerHTML|outerHTML|insertAdjacentHTML|document\.write|\beval\(|new Function|createContextualFragment|DOMParser|setHTML|srcdoc`)
	remote := regexp.MustCompile(`(?i)(src|href)\s*=\s*["']?(https?:)?//`)
	inline := regexp.MustCompile(`(?i)<script(?:\s[^>]*)?>\s*[^<\s]|\son[a-z]+\s*=|javascript:`)
	err := filepath.WalkDir("assets", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if m := forbidden.Find(data); m != nil {
			t.Errorf("%s uses %s", path, m)
		}
		if m := remote.Find(data); m != nil {
			t.Errorf("%s refers to another origin: %s", path, m)
		}
		if strings.HasSuffix(path, ".html") {
			if m := inline.Find(data); m != nil {
				t.Errorf("%s has inline script: %s", path, m)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
