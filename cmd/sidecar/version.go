package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"
)

// unstamped is the value of version in a binary built without
// -ldflags "-X main.version=...".
const unstamped = "dev"

// buildVersion describes this binary.
type buildVersion struct {
	// Version is the version stamped at build time; in an unstamped binary,
	// the main module's version that Go recorded (a release tag for
	// `go install ...@v1.2.3`, a pseudo-version for a build in a git
	// checkout); else "dev".
	Version string `json:"version"`
	// Revision is the VCS commit Go recorded (vcs.revision), "" when none
	// (a build outside a checkout, or with -buildvcs=false).
	Revision string `json:"revision,omitempty"`
	// Modified is vcs.modified: the checkout had uncommitted changes.
	Modified  bool   `json:"modified,omitempty"`
	GoVersion string `json:"goVersion"`
	Platform  string `json:"platform"` // GOOS/GOARCH
}

// currentVersion describes the running binary.
func currentVersion() buildVersion {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		info = nil
	}
	return resolveVersion(version, info)
}

// resolveVersion describes a binary stamped with stamped and built as info
// says (nil when it carries no build information).
func resolveVersion(stamped string, info *debug.BuildInfo) buildVersion {
	v := buildVersion{Version: stamped, GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if info == nil {
		if v.Version == "" {
			v.Version = unstamped
		}
		return v
	}
	if info.GoVersion != "" {
		v.GoVersion = info.GoVersion
	}
	if v.Version == "" || v.Version == unstamped {
		v.Version = unstamped
		if mv := info.Main.Version; mv != "" && mv != "(devel)" {
			v.Version = mv
		}
	}
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Revision = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		case "GOOS":
			v.Platform = s.Value + v.Platform[strings.Index(v.Platform, "/"):]
		case "GOARCH":
			v.Platform = v.Platform[:strings.Index(v.Platform, "/")+1] + s.Value
		}
	}
	return v
}

// String is the one line `leasehold version` prints.
func (v buildVersion) String() string {
	var details []string
	if v.Revision != "" {
		r := "revision " + v.Revision
		if v.Modified {
			r += ", modified"
		}
		details = append(details, r)
	}
	details = append(details, v.GoVersion+" "+v.Platform)
	return fmt.Sprintf("leasehold %s (%s)", v.Version, strings.Join(details, "; "))
}

// versionCommand is `leasehold version` (also `leasehold --version`).
func versionCommand() *command {
	c := &command{
		name:    "version",
		summary: "print the version (also --version)",
		usage:   "leasehold version [-o text|json]",
	}
	flags := func() (*flag.FlagSet, *string) {
		fs := flag.NewFlagSet("leasehold version", flag.ContinueOnError)
		return fs, fs.String("o", outputText, "output `format`: text (one line) or json")
	}
	c.help = func(w io.Writer, _ func(string) string) {
		fs, _ := flags()
		printCommandHelp(w, c, `
Prints the version stamped at build time (-ldflags "-X main.version=..."),
or, in a binary built without it, the module version Go recorded; then the
VCS revision (and whether the checkout was modified) when Go recorded one,
the Go version and the platform. Exits 0; 2 for a usage error.`, fs, "")
	}
	c.run = func(args []string, e *env) int {
		fs, output := flags()
		if status, done := parseFlags(fs, c, args, e); done {
			return status
		}
		v := currentVersion()
		switch *output {
		case outputText:
			fmt.Fprintln(e.stdout, v)
		case outputJSON:
			enc := json.NewEncoder(e.stdout)
			_ = enc.Encode(v)
		default:
			return usageError(e, c, fmt.Sprintf("-o %q: want text or json", *output))
		}
		return exitDone
	}
	return c
}
