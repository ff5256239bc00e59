package main

import (
	"fmt"
	"io"
	"runtime/debug"
)

// version is set at build time with -ldflags "-X main.version=v1.2.3".
var version = "dev"

func printVersion(w io.Writer) {
	commit, modified := "unknown", false
	goVersion := "unknown"
	v := version // a local: printVersion may run concurrently (tests)
	if info, ok := debug.ReadBuildInfo(); ok {
		goVersion = info.GoVersion
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				commit = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
		if v == "dev" && info.Main.Version != "" && info.Main.Version != "(devel)" {
			v = info.Main.Version
		}
	}
	if modified {
		commit += "-dirty"
	}
	fmt.Fprintf(w, "turnd %s\ncommit %s\n%s\n", v, commit, goVersion)
}
