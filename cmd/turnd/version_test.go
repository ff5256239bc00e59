package main

import (
	"runtime/debug"
	"testing"
)

func TestVersionText(t *testing.T) {
	t.Parallel()
	vcs := func(rev, modified string) *debug.BuildInfo {
		return &debug.BuildInfo{GoVersion: "go1.99.1", Main: debug.Module{Path: "github.com/turnd/turnd", Version: "(devel)"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: modified}}}
	}
	for _, tt := range []struct {
		name, version, commit string
		info                  *debug.BuildInfo
		want                  string
	}{
		{"stamped revision", "v1.2.3", "", vcs("abc123", "false"), "turnd v1.2.3\ncommit abc123\ngo1.99.1\n"},
		{"dirty tree", "v1.2.3", "", vcs("abc123", "true"), "turnd v1.2.3\ncommit abc123-dirty\ngo1.99.1\n"},
		{"the stamped revision beats the ldflag", "dev", "fromldflags", vcs("abc123", "false"), "turnd dev\ncommit abc123\ngo1.99.1\n"},
		{"ldflag commit without VCS stamp", "v1.2.3", "fromldflags", &debug.BuildInfo{GoVersion: "go1.99.1"}, "turnd v1.2.3\ncommit fromldflags\ngo1.99.1\n"},
		{"nothing known", "dev", "", &debug.BuildInfo{GoVersion: "go1.99.1"}, "turnd dev\ncommit unknown\ngo1.99.1\n"},
		{"no build info", "dev", "", nil, "turnd dev\ncommit unknown\nunknown\n"},
		{"module version when built by go install", "dev", "", &debug.BuildInfo{GoVersion: "go1.99.1", Main: debug.Module{Version: "v0.4.0"}},
			"turnd v0.4.0\ncommit unknown\ngo1.99.1\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := versionText(tt.version, tt.commit, tt.info); got != tt.want {
				t.Errorf("versionText = %q, want %q", got, tt.want)
			}
		})
	}
}
