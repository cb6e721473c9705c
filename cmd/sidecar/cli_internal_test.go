package main

import (
	"bytes"
	"io"
	"os"
	"regexp"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
	"time"
)

// result is what one run of the CLI did.
type result struct {
	code           int
	stdout, stderr string
	sidecarRuns    int // how many times it started the sidecar
}

// invoke runs the CLI with args and environment vars (nothing else is
// set), in-process. The sidecar is a stub that only counts its starts.
func invoke(t *testing.T, vars map[string]string, args ...string) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	var r result
	r.code = cli(args, &env{
		ctx:    t.Context(),
		stdout: &stdout,
		stderr: &stderr,
		getenv: func(k string) string { return vars[k] },
		now:    time.Now,
		sidecar: func(io.Writer) int {
			r.sidecarRuns++
			return 0
		},
	})
	r.stdout, r.stderr = stdout.String(), stderr.String()
	return r
}

// Anything leasehold does not know is a usage error: exit 2, the error and
// the hint to 'leasehold help' on stderr, in at most three lines (never the
// whole usage), nothing on stdout, and never the sidecar.
func TestUsageErrorsExitTwoAndNeverStartTheSidecar(t *testing.T) {
	for _, args := range [][]string{
		{"bogus"}, {""}, {"-x"}, {"--bogus"}, {"--versio"}, {"statuss"}, {"Status"},
		{"-h", "x"}, {"--help", "status"}, {"--version", "x"},
		{"sidecar", "extra"}, {"sidecar", "--flag"}, {"sidecar", "-v"},
		{"status", "extra"}, {"status", "--bogus"}, {"status", "-o", "yaml"}, {"status", "-o"},
		{"status", "--addr", "nope"}, {"status", "--addr", "127.0.0.1:0"}, {"status", "--addr", "ftp://127.0.0.1:4040"},
		{"status", "--addr", "http://127.0.0.1:4040/v1"},
		{"token", "now"}, {"token", "-o", "yaml"},
		{"wait", "--timeout", "-1s"}, {"wait", "--timeout", "soon"}, {"wait", "5s"},
		{"release", "--for", "-1s"}, {"release", "--for", "later"}, {"release", "now"},
		{"version", "extra"}, {"version", "-o", "yaml"}, {"version", "--short"},
		{"help", "bogus"}, {"help", "status", "extra"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			r := invoke(t, nil, args...)
			if r.code != exitUsage || r.sidecarRuns != 0 {
				t.Fatalf("exit %d, sidecar started %d times; want exit 2 and no sidecar\nstderr: %s", r.code, r.sidecarRuns, r.stderr)
			}
			if r.stdout != "" {
				t.Errorf("stdout %q: want nothing", r.stdout)
			}
			if !strings.Contains(r.stderr, "Run 'leasehold help") || strings.Count(r.stderr, "\n") > 3 {
				t.Errorf("stderr %q: want the error and the hint to leasehold help, in at most three lines", r.stderr)
			}
		})
	}
}

// run and install keep their own usage errors: exit 2 and one line that
// names the flag or argument and the rule (docs/run.md), never the sidecar.
func TestRunAndInstallUsageErrorsAreOneLine(t *testing.T) {
	for _, args := range [][]string{
		{"install"}, {"install", "a", "b"}, {"install", "--force", "/x"},
		{"run"}, {"run", "--bogus", "--", "true"}, {"run", "true"},
	} {
		r := invoke(t, nil, args...)
		if r.code != exitUsage || r.sidecarRuns != 0 || r.stdout != "" || strings.Count(r.stderr, "\n") != 1 ||
			!strings.HasPrefix(r.stderr, "leasehold "+args[0]+": ") {
			t.Errorf("%q: exit %d, sidecar started %d times, stdout %q, stderr %q; want exit 2 and one line", args, r.code, r.sidecarRuns, r.stdout, r.stderr)
		}
	}
}

// An unknown command or flag is one line naming it and the hint to
// 'leasehold help', not the whole usage; a command's usage error adds its
// synopsis.
func TestUnknownCommandIsOneLineAndTheHint(t *testing.T) {
	for args, want := range map[string]string{
		"bogus":   "leasehold: unknown command \"bogus\"\nRun 'leasehold help' for usage.\n",
		"--bogus": "leasehold: unknown flag \"--bogus\"\nRun 'leasehold help' for usage.\n",
		"-h x":    "leasehold: unexpected argument \"x\" after -h\nRun 'leasehold help' for usage.\n",
	} {
		if r := invoke(t, nil, strings.Fields(args)...); r.stderr != want {
			t.Errorf("leasehold %s: stderr %q, want %q", args, r.stderr, want)
		}
	}
	r := invoke(t, nil, "status", "--bogus")
	if want := "leasehold status: flag provided but not defined: -bogus\nusage: leasehold status "; !strings.HasPrefix(r.stderr, want) ||
		!strings.HasSuffix(r.stderr, "\nRun 'leasehold help status' for details.\n") {
		t.Errorf("stderr %q: want it to start %q and end with the hint", r.stderr, want)
	}
}

// Help, asked for in every way, goes to stdout with exit 0 and never
// starts the sidecar.
func TestHelpExitsZero(t *testing.T) {
	cases := [][]string{{"help"}, {"-h"}, {"-help"}, {"--help"}, {"help", "-h"}}
	for _, c := range commands() {
		cases = append(cases, []string{"help", c.name}, []string{c.name, "-h"}, []string{c.name, "--help"})
	}
	for _, args := range cases {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			r := invoke(t, nil, args...)
			if r.code != 0 || r.sidecarRuns != 0 || r.stderr != "" {
				t.Fatalf("exit %d, sidecar started %d times, stderr %q; want exit 0, help alone", r.code, r.sidecarRuns, r.stderr)
			}
			if !strings.Contains(r.stdout, "usage: leasehold") {
				t.Errorf("stdout %q: want the usage", r.stdout)
			}
		})
	}
}

// Every client command's help states the exit statuses and the flags it
// takes; the usage states them for all.
func TestHelpDocumentsExitStatusesAndFlags(t *testing.T) {
	for name, flags := range map[string][]string{
		"status":  {"-addr", "-o"},
		"token":   {"-addr", "-o"},
		"wait":    {"-addr", "-o", "-timeout"},
		"release": {"-addr", "-o", "-for"},
	} {
		r := invoke(t, nil, name, "--help")
		if !strings.Contains(r.stdout, clientExitStatuses) {
			t.Errorf("%s --help does not state the exit statuses:\n%s", name, r.stdout)
		}
		for _, f := range flags {
			if !strings.Contains(r.stdout, "\n  "+f+" ") {
				t.Errorf("%s --help does not document %s:\n%s", name, f, r.stdout)
			}
		}
	}
	if r := invoke(t, nil, "help"); !strings.Contains(r.stdout, clientExitStatuses) {
		t.Errorf("the usage does not state the exit statuses:\n%s", r.stdout)
	}
	if r := invoke(t, nil, "sidecar", "--help"); !strings.Contains(r.stdout, sidecarExitStatuses) {
		t.Errorf("sidecar --help does not state its exit statuses:\n%s", r.stdout)
	}
}

// The sidecar's help lists exactly the variables of the README's
// configuration table (and KUBECONFIG).
func TestSidecarHelpListsTheREADMEVariables(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, config, ok := strings.Cut(string(readme), "\n## Configuration\n")
	if !ok {
		t.Fatal("README.md has no Configuration section")
	}
	config, _, _ = strings.Cut(config, "\n## ")
	row := regexp.MustCompile("(?m)^\\| `(LEASEHOLD_[A-Z_]+)` \\|")
	var want []string
	for _, m := range row.FindAllStringSubmatch(config, -1) {
		want = append(want, m[1])
	}
	var got []string
	for _, m := range regexp.MustCompile(`(?m)^  (LEASEHOLD_[A-Z_]+) `).FindAllStringSubmatch(sidecarHelp, -1) {
		got = append(got, m[1])
	}
	if len(want) < 10 || !slices.Equal(got, want) {
		t.Errorf("sidecar help lists\n%v\nthe README's configuration table\n%v", got, want)
	}
	if !strings.Contains(sidecarHelp, "\n  KUBECONFIG ") {
		t.Error("sidecar help does not mention KUBECONFIG")
	}
}

// No arguments, or `sidecar`, run the sidecar (and only they do).
func TestNoArgumentsOrSidecarRunTheSidecar(t *testing.T) {
	for _, args := range [][]string{nil, {"sidecar"}, {"sidecar", "--"}} {
		r := invoke(t, nil, args...)
		if r.code != 0 || r.sidecarRuns != 1 || r.stdout != "" || r.stderr != "" {
			t.Errorf("%q: exit %d, sidecar started %d times, stdout %q, stderr %q; want the sidecar, once", args, r.code, r.sidecarRuns, r.stdout, r.stderr)
		}
	}
}

func TestVersionCommand(t *testing.T) {
	want := currentVersion().String() + "\n"
	for _, args := range [][]string{{"version"}, {"--version"}, {"-version"}, {"version", "-o", "text"}} {
		r := invoke(t, nil, args...)
		if r.code != 0 || r.stdout != want || r.stderr != "" {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit 0 and %q", args, r.code, r.stdout, r.stderr, want)
		}
	}
	r := invoke(t, nil, "version", "-o", "json")
	if !strings.HasPrefix(r.stdout, `{"version":"`+currentVersion().Version+`"`) || r.code != 0 {
		t.Errorf("version -o json: exit %d, %q", r.code, r.stdout)
	}
}

// An unstamped binary reports the module version and VCS revision Go
// recorded; a stamped one its stamp, with the revision.
func TestResolveVersion(t *testing.T) {
	goVersion := runtime.Version()
	platform := runtime.GOOS + "/" + runtime.GOARCH
	info := func(mainVersion string, settings ...string) *debug.BuildInfo {
		bi := &debug.BuildInfo{GoVersion: "go1.99.1", Main: debug.Module{Path: "github.com/leasehold/leasehold", Version: mainVersion}}
		for i := 0; i < len(settings); i += 2 {
			bi.Settings = append(bi.Settings, debug.BuildSetting{Key: settings[i], Value: settings[i+1]})
		}
		return bi
	}
	for _, tc := range []struct {
		name    string
		stamped string
		info    *debug.BuildInfo
		want    buildVersion
		line    string
	}{
		{"stamped", "v1.2.3", info("(devel)", "vcs.revision", "abc123", "vcs.modified", "false", "GOOS", "linux", "GOARCH", "arm64"),
			buildVersion{Version: "v1.2.3", Revision: "abc123", GoVersion: "go1.99.1", Platform: "linux/arm64"},
			"leasehold v1.2.3 (revision abc123; go1.99.1 linux/arm64)"},
		{"go install @version", "dev", info("v1.4.0"),
			buildVersion{Version: "v1.4.0", GoVersion: "go1.99.1", Platform: platform},
			"leasehold v1.4.0 (go1.99.1 " + platform + ")"},
		{"checkout, modified", "dev", info("v0.0.0-20260101000000-abcdef123456+dirty", "vcs.revision", "abcdef123456", "vcs.modified", "true"),
			buildVersion{Version: "v0.0.0-20260101000000-abcdef123456+dirty", Revision: "abcdef123456", Modified: true, GoVersion: "go1.99.1", Platform: platform},
			"leasehold v0.0.0-20260101000000-abcdef123456+dirty (revision abcdef123456, modified; go1.99.1 " + platform + ")"},
		{"devel, no VCS", "dev", info("(devel)"),
			buildVersion{Version: "dev", GoVersion: "go1.99.1", Platform: platform},
			"leasehold dev (go1.99.1 " + platform + ")"},
		{"empty stamp", "", info(""),
			buildVersion{Version: "dev", GoVersion: "go1.99.1", Platform: platform},
			"leasehold dev (go1.99.1 " + platform + ")"},
		{"no build info", "dev", nil,
			buildVersion{Version: "dev", GoVersion: goVersion, Platform: platform},
			"leasehold dev (" + goVersion + " " + platform + ")"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := resolveVersion(tc.stamped, tc.info)
			if got != tc.want {
				t.Errorf("resolveVersion = %+v, want %+v", got, tc.want)
			}
			if got.String() != tc.line {
				t.Errorf("String() = %q, want %q", got.String(), tc.line)
			}
		})
	}
}
