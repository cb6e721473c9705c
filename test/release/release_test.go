// Package release_test checks the release engineering that CI cannot run
// for real: that the Makefile, .goreleaser.yaml and the chart stamp one
// version and build with the one definition of the build flags
// (internal/buildflags/flags.env), that `make help` lists every documented
// target, and the license and changelog. The Dockerfile's side is in
// test/image; `make release-snapshot` (in CI) runs GoReleaser itself.
package release_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"text/template"

	"sigs.k8s.io/yaml"

	"github.com/leasehold/leasehold/internal/buildflags"
)

var root = func() string {
	dir, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		panic(err)
	}
	return dir
}()

// semver is SemVer 2.0.0's own regular expression (semver.org), which Helm
// requires of a chart's version.
var semver = regexp.MustCompile(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$`)

// makeDryRun prints the commands `make args…` would run, without running
// them.
func makeDryRun(t *testing.T, args ...string) []string {
	t.Helper()
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make")
	}
	cmd := exec.Command("make", append([]string{"--no-print-directory", "-n"}, args...)...)
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("make -n %v: %v\n%s", args, err, stderr.Bytes())
	}
	return strings.Split(strings.TrimSpace(string(out)), "\n")
}

// command returns the line of lines that runs prog (its first word after
// NAME=value assignments), split into words (single quotes honoured).
func command(t *testing.T, lines []string, prog string) []string {
	t.Helper()
	for _, line := range lines {
		words := splitWords(line)
		i := 0
		for i < len(words) && strings.Contains(words[i], "=") && !strings.HasPrefix(words[i], "-") {
			i++
		}
		if i < len(words) && (words[i] == prog || filepath.Base(words[i]) == prog) {
			return words
		}
	}
	t.Fatalf("no %s command in %q", prog, lines)
	return nil
}

// splitWords splits a command line made by make into words; single quotes
// group (enough for the recipes checked here).
func splitWords(s string) []string {
	var words []string
	var cur strings.Builder
	in, quoted := false, false
	for _, r := range s {
		switch {
		case r == '\'':
			quoted, in = !quoted, true
		case (r == ' ' || r == '\t') && !quoted:
			if in {
				words = append(words, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteRune(r)
			in = true
		}
	}
	if in {
		words = append(words, cur.String())
	}
	return words
}

// make build builds bin/leasehold from cmd/sidecar with the release flags
// and the version it is given.
func TestMakeBuildUsesTheReleaseFlags(t *testing.T) {
	const v = "v9.8.7-6-gabcdef0-dirty"
	words := command(t, makeDryRun(t, "build", "VERSION="+v), "go")
	f := buildflags.Release()
	want := slices.Concat(f.Env(), []string{"go", "build"}, f.Args(v), []string{"-o", "bin/leasehold", "./cmd/sidecar"})
	if !slices.Equal(words, want) {
		t.Errorf("make build runs %q, want %q (%s)", words, want, buildflags.File)
	}
}

// make image builds the binaries with the release flags and the version
// it is given, and passes hack/image the version, the commit, the commit's
// time and the image tag (the version without its v, as the chart's
// appVersion).
func TestMakeImageStampsVersionAndRevision(t *testing.T) {
	const v = "v1.2.3"
	lines := makeDryRun(t, "image", "VERSION="+v, "REVISION=0123abc", "SOURCE_DATE_EPOCH=1700000000")
	f := buildflags.Release()
	var builds []string
	for _, line := range lines {
		words := splitWords(line)
		if i := slices.Index(words, "go"); i >= 0 && i+1 < len(words) && words[i+1] == "build" {
			builds = append(builds, words[slices.Index(words, "-o")+1])
			for _, want := range append(f.Env(), f.Args(v)...) {
				if !slices.Contains(words, want) {
					t.Errorf("make image runs %q: want %q (%s)", line, want, buildflags.File)
				}
			}
		}
	}
	if want := []string{"dist/image/bin/linux_amd64/leasehold", "dist/image/bin/linux_arm64/leasehold"}; !slices.Equal(builds, want) {
		t.Errorf("make image builds %q, want %q", builds, want)
	}
	run := imageRun(t, lines)
	for _, want := range []string{"-version v1.2.3", "-revision 0123abc", "-created 1700000000", "-tag 1.2.3"} {
		if !strings.Contains(run, want) {
			t.Errorf("make image runs %q: want %q", run, want)
		}
	}
}

// imageRun returns the line of make image's commands that runs hack/image.
func imageRun(t *testing.T, lines []string) string {
	t.Helper()
	for _, l := range lines {
		if strings.HasPrefix(l, "cd hack/image && go run . ") {
			return l
		}
	}
	t.Fatalf("make image does not run hack/image: %q", lines)
	return ""
}

// Without SOURCE_DATE_EPOCH, make image dates the image at the commit's
// time, so that the same commit gives the same image.
func TestMakeImageDatesTheImageAtTheCommit(t *testing.T) {
	out, err := exec.Command("git", "-C", root, "log", "-1", "--format=%ct").Output()
	if err != nil {
		t.Skipf("git: %v", err)
	}
	want := "-created " + strings.TrimSpace(string(out)) + " "
	if run := imageRun(t, makeDryRun(t, "image")); !strings.Contains(run, want) {
		t.Errorf("make image runs %q: want %q (the commit's time)", run, want)
	}
}

// make chart packages the chart with a SemVer version and the image tag as
// appVersion (the default image tag), from any git describe output: before
// the first tag (a bare commit), v0.0.0-g<commit>.
func TestMakeChartStampsTheVersion(t *testing.T) {
	for version, want := range map[string][2]string{
		"v1.2.3":                  {"1.2.3", "1.2.3"},
		"v1.2.3-rc.1":             {"1.2.3-rc.1", "1.2.3-rc.1"},
		"v1.2.3-4-gabcdef0-dirty": {"1.2.3-4-gabcdef0-dirty", "1.2.3-4-gabcdef0-dirty"},
		"abcdef0":                 {"0.0.0-gabcdef0", "0.0.0-gabcdef0"},
		"0123456-dirty":           {"0.0.0-g0123456-dirty", "0.0.0-g0123456-dirty"},
	} {
		words := command(t, makeDryRun(t, "chart", "VERSION="+version), "helm")
		line := strings.Join(words, " ")
		if !strings.Contains(line, "package charts/leasehold --version "+want[0]+" --app-version "+want[1]+" ") {
			t.Errorf("VERSION=%s: make chart runs %q, want --version %s --app-version %s", version, line, want[0], want[1])
		}
		if !semver.MatchString(want[0]) {
			t.Errorf("VERSION=%s: chart version %s is not SemVer", version, want[0])
		}
	}
}

// goreleaserConfig is what the test reads of .goreleaser.yaml.
type goreleaserConfig struct {
	Version     int    `json:"version"`
	ProjectName string `json:"project_name"`
	Builds      []struct {
		ID      string   `json:"id"`
		Main    string   `json:"main"`
		Binary  string   `json:"binary"`
		Goos    []string `json:"goos"`
		Goarch  []string `json:"goarch"`
		Env     []string `json:"env"`
		Flags   []string `json:"flags"`
		Ldflags []string `json:"ldflags"`
	} `json:"builds"`
	Archives []struct {
		Formats []string `json:"formats"`
		Files   []string `json:"files"`
	} `json:"archives"`
	Checksum struct {
		NameTemplate string `json:"name_template"`
		Algorithm    string `json:"algorithm"`
	} `json:"checksum"`
	Snapshot struct {
		VersionTemplate string `json:"version_template"`
	} `json:"snapshot"`
	SBOMs []struct {
		Artifacts string   `json:"artifacts"`
		Cmd       string   `json:"cmd"`
		Args      []string `json:"args"`
	} `json:"sboms"`
}

// goreleaserTemplate evaluates a GoReleaser template with the functions the
// configuration uses, as GoReleaser defines them (internal/tmpl), and
// .Summary, the output of git describe --tags --always --dirty, in the
// environment env.
func goreleaserTemplate(t *testing.T, text, summary string, env map[string]string) string {
	t.Helper()
	tmpl, err := template.New("goreleaser").Option("missingkey=error").Funcs(template.FuncMap{
		"mustReadFile": func(path string) (string, error) {
			data, err := os.ReadFile(filepath.Join(root, path))
			return strings.TrimSpace(string(data)), err
		},
		"filter": func(content, exp string) (string, error) {
			re, err := regexp.CompilePOSIX(exp)
			if err != nil {
				return "", err
			}
			var lines []string
			for line := range strings.SplitSeq(content, "\n") {
				if re.MatchString(line) {
					lines = append(lines, line)
				}
			}
			return strings.Join(lines, "\n"), nil
		},
		"trimprefix": strings.TrimPrefix,
		"replace":    strings.ReplaceAll,
		"envOrDefault": func(name, def string) string {
			if v, ok := env[name]; ok && v != "" {
				return v
			}
			return def
		},
	}).Parse(text)
	if err != nil {
		t.Fatalf("template %q: %v", text, err)
	}
	var out strings.Builder
	if err := tmpl.Execute(&out, map[string]string{"Summary": summary}); err != nil {
		t.Fatalf("template %q: %v", text, err)
	}
	return out.String()
}

// GoReleaser builds the leasehold binary for linux/amd64 and linux/arm64
// with the release flags read from flags.env and the version of git
// describe, archives it with the license, and writes SHA-256 checksums.
func TestGoReleaserBuildsWithTheReleaseFlags(t *testing.T) {
	c := readGoreleaserConfig(t)
	if c.Version != 2 {
		t.Errorf("version: %d, want 2 (GoReleaser's current configuration schema)", c.Version)
	}
	if len(c.Builds) != 1 {
		t.Fatalf("%d builds, want 1", len(c.Builds))
	}
	b := c.Builds[0]
	if b.Main != "./cmd/sidecar" || b.Binary != "leasehold" {
		t.Errorf("build main %q binary %q, want ./cmd/sidecar as leasehold", b.Main, b.Binary)
	}
	if !slices.Equal(b.Goos, []string{"linux"}) || !slices.Equal(b.Goarch, []string{"amd64", "arm64"}) {
		t.Errorf("build targets %v × %v, want linux × amd64, arm64", b.Goos, b.Goarch)
	}
	if len(b.Flags) != 0 {
		t.Errorf("build flags %q: want none but those of %s (through GOFLAGS)", b.Flags, buildflags.File)
	}

	const summary = "v9.8.7-6-gabcdef0-dirty"
	f := buildflags.Release()
	env := map[string]string{}
	for _, e := range b.Env {
		if !strings.Contains(e, buildflags.File) {
			t.Errorf("build env %q: want it read from %s", e, buildflags.File)
		}
		name, value, _ := strings.Cut(goreleaserTemplate(t, e, summary, nil), "=")
		env[name] = value
	}
	if env["CGO_ENABLED"] != f.CGOEnabled {
		t.Errorf("build env CGO_ENABLED=%q, want %q", env["CGO_ENABLED"], f.CGOEnabled)
	}
	if flags := strings.Fields(env["GOFLAGS"]); !slices.Equal(flags, f.Flags) {
		t.Errorf("build env GOFLAGS=%q, want %q", env["GOFLAGS"], f.Flags)
	}
	var ldflags []string
	if !slices.ContainsFunc(b.Ldflags, func(l string) bool { return strings.Contains(l, buildflags.File) }) {
		t.Errorf("build ldflags %q: want them read from %s", b.Ldflags, buildflags.File)
	}
	for _, l := range b.Ldflags {
		ldflags = append(ldflags, goreleaserTemplate(t, l, summary, nil))
	}
	if got, want := strings.Join(ldflags, " "), f.LDFlagsFor(summary); got != want {
		t.Errorf("build ldflags %q, want %q (%s, the version of git describe)", got, want, buildflags.File)
	}

	if len(c.Archives) != 1 || !slices.Contains(c.Archives[0].Files, "LICENSE") {
		t.Errorf("archives %+v: want one, with the LICENSE", c.Archives)
	}
	if c.Checksum.Algorithm != "sha256" || c.Checksum.NameTemplate == "" {
		t.Errorf("checksum %+v: want SHA-256 checksums", c.Checksum)
	}
}

// The version git describe gives at a release tag vX.Y.Z is the one the
// chart and the changelog name: Chart.yaml's version and appVersion are
// X.Y.Z and CHANGELOG.md has a section for it. Between releases, Chart.yaml
// names the next release, which CHANGELOG.md describes in a dated section.
func TestReleaseTagMatchesChartAndChangelog(t *testing.T) {
	var chart struct{ Version, AppVersion string }
	data, err := os.ReadFile(filepath.Join(root, "charts", "leasehold", "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &chart); err != nil {
		t.Fatal(err)
	}
	if !semver.MatchString(chart.Version) {
		t.Errorf("Chart.yaml version %q is not SemVer", chart.Version)
	}
	changelog, err := os.ReadFile(filepath.Join(root, "CHANGELOG.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(changelog, []byte("\n## [Unreleased]\n")) {
		t.Errorf("CHANGELOG.md has no ## [Unreleased] section (Keep a Changelog)")
	}
	// Chart.yaml's version is always a release CHANGELOG.md describes, so
	// that tagging it is the only step left (README, "Releasing").
	heading := regexp.MustCompile(`(?m)^## \[` + regexp.QuoteMeta(chart.Version) + `\] - \d{4}-\d{2}-\d{2}$`)
	if !heading.Match(changelog) {
		t.Errorf("CHANGELOG.md has no ## [%s] - YYYY-MM-DD section for Chart.yaml's version", chart.Version)
	}
	for _, m := range regexp.MustCompile(`(?m)^## \[([^\]]+)\]`).FindAllSubmatch(changelog, -1) {
		if !bytes.Contains(changelog, []byte("\n["+string(m[1])+"]: https://")) {
			t.Errorf("CHANGELOG.md: ## [%s] has no link ([%s]: https://…)", m[1], m[1])
		}
	}
	if chart.AppVersion != chart.Version {
		t.Errorf("Chart.yaml: appVersion %s, version %s: one release names both", chart.AppVersion, chart.Version)
	}

	cmd := exec.Command("git", "describe", "--tags", "--exact-match", "--match", "v[0-9]*")
	cmd.Dir = root
	out, err := cmd.Output()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		t.Logf("not at a release tag: Chart.yaml names the next release, %s (appVersion %s)", chart.Version, chart.AppVersion)
		return
	case err != nil:
		t.Skipf("git: %v", err)
	}
	tag := strings.TrimSpace(string(out))
	want := strings.TrimPrefix(tag, "v")
	if chart.Version != want || chart.AppVersion != want {
		t.Errorf("at tag %s, Chart.yaml has version %s appVersion %s, want %s for both", tag, chart.Version, chart.AppVersion, want)
	}
	if !bytes.Contains(changelog, []byte("\n## ["+want+"]")) {
		t.Errorf("at tag %s, CHANGELOG.md has no ## [%s] section", tag, want)
	}
}

// LICENSE is the Apache License 2.0, verbatim: the text at
// https://www.apache.org/licenses/LICENSE-2.0.txt (its SHA-256), which
// tools such as GitHub's licensee recognise.
func TestLicenseIsTheApacheLicense(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(root, "LICENSE"))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	if got := hex.EncodeToString(sum[:]); got != "cfc7749b96f63bd31c3c42b5c471bf756814053e847c10f3eb003417bc523d30" {
		t.Errorf("LICENSE: SHA-256 %s, want the Apache License 2.0 verbatim", got)
	}
}

// The release has an SBOM of each archive and of each of the image's
// platforms, in SPDX, by the pinned syft: GoReleaser runs syft on every
// archive (make release-snapshot puts the pinned one first on its PATH),
// then make release-snapshot builds the image and scans each platform of
// its OCI layout.
func TestReleaseSnapshotWritesSBOMs(t *testing.T) {
	c := readGoreleaserConfig(t)
	if len(c.SBOMs) != 1 || c.SBOMs[0].Artifacts != "archive" || c.SBOMs[0].Cmd != "syft" || !slices.Contains(c.SBOMs[0].Args, "spdx-json=$document") {
		t.Errorf("sboms %+v: want syft writing spdx-json for every archive", c.SBOMs)
	}
	lines := makeDryRun(t, "release-snapshot", "VERSION=v1.2.3")
	syftDir := filepath.Join(root, ".cache", "syft")
	var goreleaser string
	scans := map[string]bool{}
	for _, l := range lines {
		if strings.Contains(l, "goreleaser release --snapshot") {
			goreleaser = l
		}
		if m := regexp.MustCompile(`/syft scan oci-dir:dist/image/oci --platform (linux/\w+) --quiet --output spdx-json=dist/image/leasehold-1\.2\.3-linux-\w+\.spdx\.json$`).FindStringSubmatch(l); m != nil {
			scans[m[1]] = true
		}
	}
	if !strings.HasPrefix(goreleaser, "PATH="+syftDir+"/") {
		t.Errorf("make release-snapshot runs %q: want the pinned syft (%s/<version>) first on GoReleaser's PATH", goreleaser, syftDir)
	}
	if !scans["linux/amd64"] || !scans["linux/arm64"] || len(scans) != 2 {
		t.Errorf("make release-snapshot scans the image for %v, want linux/amd64 and linux/arm64:\n%s", scans, strings.Join(lines, "\n"))
	}
}

// make with no target prints the help, which lists every target documented
// by a `## target:` comment (their one source), each of them a real target.
func TestHelpListsEveryDocumentedTarget(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make")
	}
	cmd := exec.Command("make", "--no-print-directory")
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make: %v\n%s", err, out)
	}
	makefile, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	documented := regexp.MustCompile(`(?m)^## ([A-Za-z0-9_.-]+):`).FindAllStringSubmatch(string(makefile), -1)
	if len(documented) < 10 {
		t.Fatalf("%d documented targets in the Makefile", len(documented))
	}
	for _, m := range documented {
		name := m[1]
		if !regexp.MustCompile(`(?m)^  ` + regexp.QuoteMeta(name) + ` `).Match(out) {
			t.Errorf("make help does not list %s:\n%s", name, out)
		}
		if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + `:`).Match(makefile) {
			t.Errorf("## %s: documents no target", name)
		}
	}
	for _, name := range []string{"help", "build", "unit", "lint", "test"} {
		if !regexp.MustCompile(`(?m)^  ` + name + ` `).Match(out) {
			t.Errorf("make help does not list %s", name)
		}
	}
}

// One build stamps one version: make release-snapshot gives GoReleaser,
// the binaries' check, the chart, the image and its SBOMs the version of
// VERSION (the Makefile's, from git describe), with the v where a tag has
// it (the binaries, the image's version label) and without it where a
// SemVer goes (the archives, the chart's version and appVersion, the image
// tag). Before the first tag, git describe names a bare commit, and the
// version is v0.0.0-g<commit>.
func TestOneBuildStampsOneVersion(t *testing.T) {
	c := readGoreleaserConfig(t)
	for describe, version := range map[string]string{
		"v1.2.3":                  "v1.2.3",
		"v1.2.3-rc.1":             "v1.2.3-rc.1",
		"v1.2.3-4-gabcdef0-dirty": "v1.2.3-4-gabcdef0-dirty",
		"abcdef0":                 "v0.0.0-gabcdef0",
		"0123456-dirty":           "v0.0.0-g0123456-dirty",
	} {
		t.Run(describe, func(t *testing.T) {
			semVersion := strings.TrimPrefix(version, "v")
			if !semver.MatchString(semVersion) {
				t.Fatalf("%s is not SemVer", semVersion)
			}
			lines := makeDryRun(t, "release-snapshot", "VERSION="+describe)
			out := strings.Join(lines, "\n")

			// GoReleaser: the version it is given, in the binaries and as
			// the archives' version (a snapshot's .Version), whatever git
			// describe says.
			i := slices.IndexFunc(lines, func(l string) bool { return strings.Contains(l, "goreleaser release --snapshot") })
			if i < 0 {
				t.Fatalf("make release-snapshot runs no goreleaser release:\n%s", out)
			}
			gr := splitWords(lines[i])
			env := map[string]string{}
			for _, w := range gr {
				name, value, ok := strings.Cut(w, "=")
				if !ok {
					break // the program: its environment ends
				}
				env[name] = value
			}
			if env["LEASEHOLD_VERSION"] != version {
				t.Errorf("make release-snapshot runs %q: want LEASEHOLD_VERSION=%s", gr, version)
			}
			const otherSummary = "v9.9.9-1-g0000000"
			var ldflags []string
			for _, l := range c.Builds[0].Ldflags {
				ldflags = append(ldflags, goreleaserTemplate(t, l, otherSummary, env))
			}
			if got := strings.Join(ldflags, " "); !strings.HasSuffix(got, " -X main.version="+version) {
				t.Errorf("GoReleaser's ldflags %q: want -X main.version=%s", got, version)
			}
			if got := goreleaserTemplate(t, c.Snapshot.VersionTemplate, otherSummary, env); got != semVersion {
				t.Errorf("GoReleaser's snapshot version %q, want %s (the archives' names)", got, semVersion)
			}

			for _, want := range []string{
				"version=" + version + " && for bin in dist/leasehold_linux_*/leasehold", // each binary checked for it
				"package charts/leasehold --version " + semVersion + " --app-version " + semVersion + " ",
				"-X main.version=" + version + "' -o dist/image/bin/linux_amd64/leasehold",
				"-X main.version=" + version + "' -o dist/image/bin/linux_arm64/leasehold",
				" -tag " + semVersion + " -version " + version + " ",
				"--output spdx-json=dist/image/leasehold-" + semVersion + "-linux-amd64.spdx.json",
			} {
				if !strings.Contains(out, want) {
					t.Errorf("make release-snapshot VERSION=%s does not run %q:\n%s", describe, want, out)
				}
			}
			for _, l := range lines {
				for _, w := range strings.FieldsFunc(l, func(r rune) bool { return strings.ContainsRune(" ='\"", r) }) {
					if describe != version && w == describe {
						t.Errorf("make release-snapshot VERSION=%s stamps %s as is: %s", describe, describe, l)
					}
				}
			}
		})
	}
}

// Chart.yaml's image for Artifact Hub is the appVersion's, the image the
// chart runs by default.
func TestChartAnnotatesItsOwnImage(t *testing.T) {
	var chart struct {
		AppVersion  string            `json:"appVersion"`
		Annotations map[string]string `json:"annotations"`
	}
	data, err := os.ReadFile(filepath.Join(root, "charts", "leasehold", "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &chart); err != nil {
		t.Fatal(err)
	}
	var images []struct{ Name, Image string }
	if err := yaml.Unmarshal([]byte(chart.Annotations["artifacthub.io/images"]), &images); err != nil {
		t.Fatalf("artifacthub.io/images: %v", err)
	}
	if len(images) != 1 || images[0].Image != "ghcr.io/leasehold/leasehold:"+chart.AppVersion {
		t.Errorf("artifacthub.io/images %+v, want ghcr.io/leasehold/leasehold:%s (the appVersion)", images, chart.AppVersion)
	}
}

// The dependency-update configuration (.github/renovate.json) covers every
// Go module of the repository, moves the Kubernetes modules together and
// the Go toolchain together, and has the Kubernetes and toolchain groups
// last, so that no other rule's group overrides them (Renovate applies
// packageRules in order).
func TestRenovateGroupsTheModulesThatMoveTogether(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(root, ".github", "renovate.json"))
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		IgnorePaths  []string `json:"ignorePaths"`
		PackageRules []struct {
			MatchPackageNames []string `json:"matchPackageNames"`
			MatchDepTypes     []string `json:"matchDepTypes"`
			MatchFileNames    []string `json:"matchFileNames"`
			Enabled           *bool    `json:"enabled"`
			GroupName         string   `json:"groupName"`
		} `json:"packageRules"`
	}
	if err := json.Unmarshal(data, &c); err != nil {
		t.Fatal(err)
	}
	if len(c.IgnorePaths) != 0 {
		t.Errorf("ignorePaths %q: every module is updated", c.IgnorePaths)
	}
	groups := map[string]int{}
	files := map[string]bool{}
	for i, r := range c.PackageRules {
		if r.Enabled != nil && !*r.Enabled {
			t.Errorf("rule %d (%s) disables updates", i, r.GroupName)
		}
		if slices.Contains(r.MatchPackageNames, "k8s.io/**") {
			groups["kubernetes"] = i
		}
		if slices.Contains(r.MatchDepTypes, "golang") {
			groups["toolchain"] = i
		}
		for _, f := range r.MatchFileNames {
			files[f] = true
		}
	}
	kube, ok1 := groups["kubernetes"]
	toolchain, ok2 := groups["toolchain"]
	if !ok1 || !ok2 {
		t.Fatalf("rules %+v: want a group of k8s.io/** and one of the go directive (depType golang)", c.PackageRules)
	}
	for i, r := range c.PackageRules {
		if i > kube && i != toolchain && r.GroupName != c.PackageRules[toolchain].GroupName && len(r.MatchPackageNames) == 0 && len(r.MatchDepTypes) == 0 {
			t.Errorf("rule %d (%s) comes after the Kubernetes group and may override it", i, r.GroupName)
		}
	}
	for _, f := range []string{"go.mod", "bench/go.mod", "hack/**"} {
		if !files[f] {
			t.Errorf("no rule for %s", f)
		}
	}
	mods, err := filepath.Glob(filepath.Join(root, "hack", "*", "go.mod"))
	if err != nil || len(mods) == 0 {
		t.Fatalf("hack/*/go.mod: %v %v", mods, err)
	}
}

// make release-notes prints the release's CHANGELOG.md section, without its
// heading or the next section, and fails for a release it does not
// describe; make release publishes with those notes, the pinned syft and
// the version of the tag, only at the tag.
func TestReleaseNotesAreTheChangelogSection(t *testing.T) {
	var chart struct{ Version string }
	data, err := os.ReadFile(filepath.Join(root, "charts", "leasehold", "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &chart); err != nil {
		t.Fatal(err)
	}
	notes := func(version string) (string, error) {
		cmd := exec.Command("make", "--no-print-directory", "-s", "release-notes", "VERSION="+version)
		cmd.Dir = root
		out, err := cmd.Output()
		return string(out), err
	}
	out, err := notes("v" + chart.Version)
	if err != nil {
		t.Fatalf("make release-notes VERSION=v%s: %v", chart.Version, err)
	}
	if out == "" || strings.HasPrefix(out, "\n") || strings.HasSuffix(out, "\n\n") || strings.Contains(out, "\n## [") || strings.Contains(out, "]: https://") {
		t.Errorf("make release-notes VERSION=v%s: want the section's body alone, got:\n%s", chart.Version, out)
	}
	if _, err := notes("v999.0.0"); err == nil {
		t.Errorf("make release-notes VERSION=v999.0.0 succeeded; want a failure (no such section)")
	}

	notesFile := filepath.Join(root, ".cache", "release-notes-v"+chart.Version+".md")
	_, statErr := os.Stat(notesFile)
	lines := makeDryRun(t, "release", "VERSION=v"+chart.Version)
	if _, err := os.Stat(notesFile); statErr != nil && err == nil {
		t.Errorf("make -n release wrote %s: a dry run must write nothing", notesFile)
	}
	run := strings.Join(lines, "\n")
	for _, want := range []string{
		"git describe --tags --exact-match --match 'v[0-9]*'",
		"CHANGELOG.md > " + filepath.Join(root, ".cache", "release-notes-v"+chart.Version+".md"),
		"LEASEHOLD_VERSION=v" + chart.Version + " ",
		"goreleaser release --clean --release-notes " + filepath.Join(root, ".cache", "release-notes-v"+chart.Version+".md"),
	} {
		if !strings.Contains(run, want) {
			t.Errorf("make release does not run %q:\n%s", want, run)
		}
	}
	if i := slices.IndexFunc(lines, func(l string) bool { return strings.Contains(l, "goreleaser release --clean") }); i >= 0 && !strings.HasPrefix(lines[i], "PATH="+filepath.Join(root, ".cache", "syft")+"/") {
		t.Errorf("make release runs %q: want the pinned syft first on GoReleaser's PATH", lines[i])
	}
}

// readGoreleaserConfig parses the repository's .goreleaser.yaml.
func readGoreleaserConfig(t *testing.T) goreleaserConfig {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, ".goreleaser.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var c goreleaserConfig
	if err := yaml.Unmarshal(data, &c); err != nil {
		t.Fatal(err)
	}
	return c
}
