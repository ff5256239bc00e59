package main

import (
	"fmt"
	"io"
	"runtime/debug"
)

// version and commit are set at build time:
//
//	go build -ldflags "-X main.version=v1.2.3 -X main.commit=$(git rev-parse HEAD)"
//
// commit is only needed where the build has no VCS information (a
// container build without .git, or -buildvcs=false); otherwise the
// revision Go stamps into the binary is used.
var (
	version = "dev"
	commit  = ""
)

func printVersion(w io.Writer) {
	info, _ := debug.ReadBuildInfo() // nil without build info
	fmt.Fprint(w, versionText(version, commit, info))
}

// versionText is the three lines of `turnd version`: the version, the
// commit (with -dirty when the tree had changes), the Go version.
func versionText(v, ldCommit string, info *debug.BuildInfo) string {
	v, rev, goVersion := buildOf(v, ldCommit, info)
	return fmt.Sprintf("turnd %s\ncommit %s\n%s\n", v, rev, goVersion)
}

// thisBuild is this binary's version, revision and Go version, as
// `turnd version` and turnd_build_info give them.
func thisBuild() (v, rev, goVersion string) {
	info, _ := debug.ReadBuildInfo()
	return buildOf(version, commit, info)
}

// buildOf works out the version, the revision (with -dirty when the tree
// had changes) and the Go version from the linker's values and info.
func buildOf(v, ldCommit string, info *debug.BuildInfo) (string, string, string) {
	rev, modified := "", false
	goVersion := "unknown"
	if info != nil {
		goVersion = info.GoVersion
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
		if v == "dev" && info.Main.Version != "" && info.Main.Version != "(devel)" {
			v = info.Main.Version
		}
	}
	switch {
	case rev != "" && modified:
		rev += "-dirty"
	case rev == "" && ldCommit != "":
		rev = ldCommit
	case rev == "":
		rev = "unknown"
	}
	return v, rev, goVersion
}
