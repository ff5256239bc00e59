package main

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Every environment variable serve reads is named in `turnd serve -h`
// (flags with theirs, secrets and the rest in the closing list).
func TestServeHelpListsEveryVariable(t *testing.T) {
	t.Parallel()
	var read []string
	env := func(name string) (string, bool) {
		read = append(read, name)
		return "", false
	}
	if _, err := parseConfig("serve", nil, &bytes.Buffer{}, env); err != nil {
		t.Fatal(err)
	}
	var help bytes.Buffer
	if _, err := parseConfig("serve", []string{"-h"}, &help, func(string) (string, bool) { return "", false }); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("serve -h: %v", err)
	}
	slices.Sort(read)
	for _, name := range slices.Compact(read) {
		// "each also as NAME_FILE" covers the file variants of the secrets.
		base, isFile := strings.CutSuffix(name, "_FILE")
		if !strings.Contains(help.String(), name) && !(isFile && strings.Contains(help.String(), "  "+base+" ")) {
			t.Errorf("serve reads %s, which serve -h does not name", name)
		}
	}
	if len(read) < 20 {
		t.Errorf("only %d variables read: %v", len(read), read)
	}
}

// The secrets are named by what they do; the old names still work, the
// new name winning when both are set, and serve is told to warn.
func TestRenamedSecrets(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(file, []byte("from-a-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		env        map[string]string
		key, hook  string
		deprecated [][2]string
	}{
		{"new names", map[string]string{"TURND_COMPLETION_KEY_SECRET": "k", "TURND_WEBHOOK_SIGNING_SECRET": "w"}, "k", "w", nil},
		{"old names", map[string]string{"TURND_COMPLETION_SECRET": "k", "TURND_WEBHOOK_SECRET": "w"}, "k", "w",
			[][2]string{{"TURND_COMPLETION_SECRET", "TURND_COMPLETION_KEY_SECRET"}, {"TURND_WEBHOOK_SECRET", "TURND_WEBHOOK_SIGNING_SECRET"}}},
		{"old file", map[string]string{"TURND_WEBHOOK_SECRET_FILE": file}, "", "from-a-file",
			[][2]string{{"TURND_WEBHOOK_SECRET", "TURND_WEBHOOK_SIGNING_SECRET"}}},
		{"new wins", map[string]string{"TURND_WEBHOOK_SECRET": "old", "TURND_WEBHOOK_SIGNING_SECRET_FILE": file}, "", "from-a-file", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := parseConfig("serve", nil, &bytes.Buffer{}, func(k string) (string, bool) { v, ok := tt.env[k]; return v, ok })
			if err != nil {
				t.Fatal(err)
			}
			if c.CompletionSecret != tt.key || c.WebhookSecret != tt.hook || !slices.Equal(c.Deprecated, tt.deprecated) {
				t.Errorf("got key %q, webhook %q, deprecated %v; want %q, %q, %v", c.CompletionSecret, c.WebhookSecret, c.Deprecated, tt.key, tt.hook, tt.deprecated)
			}
		})
	}
}
