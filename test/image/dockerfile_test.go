package image_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/internal/buildflags"
)

// dockerfile is what the tests read from the Dockerfile.
type dockerfile struct {
	stages     []*stage
	buildStage *stage // the stage whose RUN calls `go build`

	// The build line: the RUN that calls `go build`, as
	// `. file && … && NAME=value … go build args`.
	buildLine   string
	sourced     []string // the files it sources (`. path`), relative to WORKDIR
	buildEnvRaw []string // NAME=value before `go build`, as written
	buildEnv    []string // the same, expanded
	buildArgs   []string // the arguments of `go build`, expanded and split as sh does

	// The final stage, which is the image.
	finalFrom  string   // its FROM image
	finalUser  string   // its last USER
	entrypoint string   // its last ENTRYPOINT, as written
	copies     []string // its COPY lines
	labels     map[string]string
	final      []string // its instructions
}

// stage is one FROM … section of the Dockerfile.
type stage struct {
	from, platform, name string   // FROM [--platform=platform] from [AS name]
	args                 []string // ARG names declared so far, in order
	defaults             map[string]string
	labels               map[string]string // LABEL key → value, expanded
	copies               []string
	user, entrypoint     string
	workdir              string // its last WORKDIR (absolute)
	steps                []step // its COPY and RUN instructions, in order
	lines                []string
}

// step is a COPY or RUN instruction of a stage, with the WORKDIR it runs in.
type step struct {
	instr, rest, workdir string
}

// parseDockerfile reads the Dockerfile at rel in the module root (joining
// continuation lines) as docker build would with the build arguments given:
// each stage's FROM, ARG, LABEL, COPY, USER and ENTRYPOINT, and the build
// line, whose variables it expands from the files the line sources (read
// from the module root, which WORKDIR mirrors) and the ARGs its stage
// declared before it. A variable neither sourced nor declared is an error:
// sh would expand it to nothing.
func parseDockerfile(root, rel string, buildArgs map[string]string) (dockerfile, error) {
	data, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		return dockerfile{}, err
	}
	var d dockerfile
	text := strings.ReplaceAll(string(data), "\\\n", " ")
	var cur *stage
	for line := range strings.Lines(text) {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		instr, rest, _ := strings.Cut(line, " ")
		rest = strings.TrimSpace(rest)
		instr = strings.ToUpper(instr)
		if instr != "FROM" && instr != "ARG" && cur == nil {
			return d, fmt.Errorf("%s: %q before the first FROM", rel, line)
		}
		switch instr {
		case "FROM":
			cur = &stage{defaults: map[string]string{}, labels: map[string]string{}}
			words := strings.Fields(rest)
			for len(words) > 0 && strings.HasPrefix(words[0], "--") {
				if p, ok := strings.CutPrefix(words[0], "--platform="); ok {
					cur.platform = p
				}
				words = words[1:]
			}
			if len(words) == 0 {
				return d, fmt.Errorf("%s: %q: no image", rel, line)
			}
			cur.from = words[0]
			if len(words) == 3 && strings.EqualFold(words[1], "AS") {
				cur.name = words[2]
			}
			d.stages = append(d.stages, cur)
		case "ARG":
			if cur == nil {
				continue // global ARGs serve FROM lines only
			}
			cmds, err := shellCommands(rest, literal)
			if err != nil || len(cmds) != 1 {
				return d, fmt.Errorf("%s: %q: %v", rel, line, err)
			}
			for _, arg := range cmds[0] {
				name, def, _ := strings.Cut(arg, "=")
				cur.args = append(cur.args, name)
				cur.defaults[name] = def
			}
		case "LABEL":
			cmds, err := shellCommands(rest, cur.lookup(buildArgs, nil))
			if err != nil || len(cmds) != 1 {
				return d, fmt.Errorf("%s: %q: %v", rel, line, err)
			}
			for _, kv := range cmds[0] {
				key, value, ok := strings.Cut(kv, "=")
				if !ok {
					return d, fmt.Errorf("%s: %q: want LABEL key=value …", rel, line)
				}
				cur.labels[key] = value
			}
		case "USER":
			cur.user = rest
		case "ENTRYPOINT":
			cur.entrypoint = rest
		case "WORKDIR":
			if !path.IsAbs(rest) {
				return d, fmt.Errorf("%s: %q: want an absolute WORKDIR", rel, line)
			}
			cur.workdir = path.Clean(rest)
		case "COPY":
			cur.copies = append(cur.copies, rest)
			cur.steps = append(cur.steps, step{instr, rest, cur.workdir})
		case "RUN":
			cur.steps = append(cur.steps, step{instr, rest, cur.workdir})
			isBuild, err := d.parseRun(root, cur, rest, buildArgs)
			if err != nil {
				return d, fmt.Errorf("%s: %q: %w", rel, line, err)
			}
			if isBuild {
				if d.buildStage != nil {
					return d, fmt.Errorf("%s: more than one RUN calls `go build`, want exactly 1", rel)
				}
				d.buildStage, d.buildLine = cur, rest
			}
		}
		cur.lines = append(cur.lines, line)
	}
	if d.buildStage == nil {
		return d, fmt.Errorf("%s: no RUN calls `go build`, want exactly 1", rel)
	}
	if len(d.stages) == 0 {
		return d, fmt.Errorf("%s: no FROM", rel)
	}
	final := d.stages[len(d.stages)-1]
	d.finalFrom, d.finalUser, d.entrypoint, d.copies, d.labels, d.final = final.from, final.user, final.entrypoint, final.copies, final.labels, final.lines
	return d, nil
}

// parseRun reads a RUN line, and if it calls `go build` records its
// sourced files, environment and arguments. Like sh, it expands each
// command only once the commands before it have run (sourced their files).
func (d *dockerfile) parseRun(root string, st *stage, run string, buildArgs map[string]string) (bool, error) {
	cmds, err := splitCommands(run)
	if err != nil {
		return false, err
	}
	for _, c := range cmds {
		if _, err := shellWords(c, literal); err != nil {
			return false, err
		}
	}
	if !strings.Contains(run, "go build") {
		return false, nil
	}
	sourced := map[string]string{}
	for i, c := range cmds {
		words, err := shellWords(c, st.lookup(buildArgs, sourced))
		if err != nil {
			return false, err
		}
		if words[0] == "." && len(words) == 2 {
			p := path.Clean(words[1])
			data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(p)))
			if err != nil {
				return false, fmt.Errorf("sources %s: %w", words[1], err)
			}
			vars, err := buildflags.Parse(string(data))
			if err != nil {
				return false, fmt.Errorf("sources %s: %w", words[1], err)
			}
			for k, v := range vars {
				sourced[k] = v
			}
			d.sourced = append(d.sourced, p)
			continue
		}
		n := 0
		for n < len(words) && regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`).MatchString(words[n]) {
			n++
		}
		if len(words) > n+1 && words[n] == "go" && words[n+1] == "build" {
			if i != len(cmds)-1 {
				return false, errors.New("`go build` must be the line's last command")
			}
			raw, _ := shellWords(c, literal)
			d.buildEnv, d.buildArgs, d.buildEnvRaw = words[:n], words[n+2:], raw[:n]
			return true, nil
		}
		return false, fmt.Errorf("%q: the build line may only source files before `go build`", c)
	}
	return false, errors.New("`go build` not found")
}

// lookup expands a variable as the stage's RUN or LABEL would see it: a
// variable set by a sourced file, else an ARG the stage declared (the build
// argument given, else its default).
func (st *stage) lookup(buildArgs, sourced map[string]string) func(string) (string, error) {
	return func(name string) (string, error) {
		if v, ok := sourced[name]; ok {
			return v, nil
		}
		if _, ok := st.defaults[name]; ok {
			if v, ok := buildArgs[name]; ok {
				return v, nil
			}
			return st.defaults[name], nil
		}
		return "", fmt.Errorf("$%s is neither set by a sourced file nor declared by an ARG of this stage before it (it would expand to nothing)", name)
	}
}

// literal leaves variables as written ($NAME).
func literal(name string) (string, error) { return "$" + name, nil }

// splitCommands splits a shell command line at each && outside quotes.
func splitCommands(s string) ([]string, error) {
	var cmds []string
	var quote rune
	start := 0
	for i := 0; i < len(s); i++ {
		switch c := rune(s[i]); {
		case quote != 0 && c == quote:
			quote = 0
		case quote != 0:
		case c == '\'' || c == '"':
			quote = c
		case c == '&' && i+1 < len(s) && s[i+1] == '&':
			cmds = append(cmds, strings.TrimSpace(s[start:i]))
			start = i + 2
			i++
		}
	}
	if quote != 0 {
		return nil, errors.New("unterminated quote")
	}
	cmds = append(cmds, strings.TrimSpace(s[start:]))
	for _, c := range cmds {
		if c == "" {
			return nil, errors.New("empty command around &&")
		}
	}
	return cmds, nil
}

// shellCommands splits a shell command line into its commands' words.
func shellCommands(s string, lookup func(string) (string, error)) ([][]string, error) {
	cmds, err := splitCommands(s)
	if err != nil {
		return nil, err
	}
	var out [][]string
	for _, c := range cmds {
		words, err := shellWords(c, lookup)
		if err != nil {
			return nil, err
		}
		out = append(out, words)
	}
	return out, nil
}

// shellWords splits one command into words as sh does for the subset the
// Dockerfile may use: single and double quotes, $NAME and ${NAME}
// (expanded by lookup, and split into fields outside double quotes).
// Anything else (;, |, &, redirections, subshells, command substitution,
// globbing, other ${…} forms, backslashes) is an error, so that the test
// never builds something other than what sh would.
func shellWords(s string, lookup func(string) (string, error)) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	var quote rune
	endWord := func() {
		if inWord {
			words = append(words, cur.String())
			cur.Reset()
			inWord = false
		}
	}
	rs := []rune(s)
	for i := 0; i < len(rs); i++ {
		r := rs[i]
		switch {
		case quote == '\'' && r == '\'':
			quote = 0
		case quote == '\'':
			cur.WriteRune(r)
		case r == '$':
			name, n, err := varName(rs[i+1:])
			if err != nil {
				return nil, err
			}
			i += n
			v, err := lookup(name)
			if err != nil {
				return nil, err
			}
			if quote == '"' {
				cur.WriteString(v)
				inWord = true
				continue
			}
			for _, c := range v { // field splitting
				if c == ' ' || c == '\t' || c == '\n' {
					endWord()
				} else {
					cur.WriteRune(c)
					inWord = true
				}
			}
		case quote == '"' && r == '"':
			quote = 0
		case quote == '"' && (r == '`' || r == '\\'):
			return nil, fmt.Errorf("unsupported shell syntax %q in double quotes", r)
		case quote == '"':
			cur.WriteRune(r)
		case r == '"' || r == '\'':
			quote, inWord = r, true
		case r == ' ' || r == '\t':
			endWord()
		case strings.ContainsRune("`;&|<>()*?[]{}~#\\", r):
			return nil, fmt.Errorf("unsupported shell syntax %q", r)
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if quote != 0 {
		return nil, errors.New("unterminated quote")
	}
	endWord()
	if len(words) == 0 {
		return nil, errors.New("empty command")
	}
	return words, nil
}

// varName reads NAME or {NAME} after a $ and returns it and the runes read.
func varName(rs []rune) (string, int, error) {
	s := string(rs)
	if m := regexp.MustCompile(`^\{([A-Za-z_][A-Za-z0-9_]*)\}`).FindStringSubmatch(s); m != nil {
		return m[1], len([]rune(m[0])), nil
	}
	if m := regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*`).FindString(s); m != "" {
		return m, len([]rune(m)), nil
	}
	return "", 0, fmt.Errorf("unsupported expansion $%.10s", s)
}

// build runs the build stage as docker build would, with no engine: in a
// fresh directory standing for its WORKDIR, holding nothing but what its
// COPY instructions copy from the module root (the build context), it runs
// each RUN in order: the build line with its environment and arguments
// (writing the binary to out instead of its -o path), any other as the
// plain command it is (go mod download). A Dockerfile that forgets to copy
// a package the binary imports, or the file its build line sources, fails
// here as it would in docker build.
func (d dockerfile) build(ctx context.Context, out string) (string, error) {
	dir, err := os.MkdirTemp("", "leasehold-docker-context-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	st := d.buildStage
	if st.workdir == "" {
		return "", errors.New("the build stage sets no WORKDIR")
	}
	for _, s := range st.steps {
		if s.workdir != st.workdir {
			return "", fmt.Errorf("%s %s runs in WORKDIR %s, want every step in %s", s.instr, s.rest, s.workdir, st.workdir)
		}
		switch s.instr {
		case "COPY":
			if err := copyIntoContext(root, dir, s.rest); err != nil {
				return "", fmt.Errorf("COPY %s: %w", s.rest, err)
			}
		case "RUN":
			if s.rest == d.buildLine {
				if err := d.runBuildLine(ctx, dir, out); err != nil {
					return "", err
				}
				continue
			}
			cmds, err := shellCommands(s.rest, st.lookup(nil, nil))
			if err != nil {
				return "", fmt.Errorf("RUN %s: %w", s.rest, err)
			}
			for _, words := range cmds {
				if err := runIn(ctx, dir, nil, words[0], words[1:]...); err != nil {
					return "", fmt.Errorf("RUN %s (the build stage): %w", s.rest, err)
				}
			}
		}
	}
	if _, err := os.Stat(out); err != nil {
		return "", fmt.Errorf("the build stage built no binary: %w", err)
	}
	return out, nil
}

// runBuildLine runs the build line in dir: the files it sources must be
// there (sh's `.` fails otherwise), then go build.
func (d dockerfile) runBuildLine(ctx context.Context, dir, out string) error {
	for _, p := range d.sourced {
		if _, err := os.Stat(filepath.Join(dir, filepath.FromSlash(p))); err != nil {
			return fmt.Errorf("the build line sources %s, which no COPY put in WORKDIR: %w", p, err)
		}
	}
	args := make([]string, 0, len(d.buildArgs))
	for i := 0; i < len(d.buildArgs); i++ {
		a := d.buildArgs[i]
		if a == "-o" && i+1 < len(d.buildArgs) {
			args = append(args, "-o", out)
			i++
			continue
		}
		args = append(args, a)
	}
	if err := runIn(ctx, dir, d.buildEnv, "go", append([]string{"build"}, args...)...); err != nil {
		return fmt.Errorf("the Dockerfile's build line, in a directory holding only what its build stage copies: %w", err)
	}
	return nil
}

// runIn runs a command in dir with the test's environment plus env, outside
// any Go workspace.
func runIn(ctx context.Context, dir string, env []string, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "GOWORK=off"), env...)
	if output, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, output)
	}
	return nil
}

// copyIntoContext does what `COPY src… dest` does for the forms the
// Dockerfile may use: sources relative to the context (a file, or a
// directory whose contents are copied), dest relative to WORKDIR (a
// directory when it ends in / or there are several sources). A source
// outside the context, a glob or a flag (--from aside, which the final
// stage uses) is an error.
func copyIntoContext(context, workdir, rest string) error {
	words := strings.Fields(rest)
	if len(words) < 2 {
		return errors.New("want COPY src… dest")
	}
	for _, w := range words {
		if strings.HasPrefix(w, "--") || strings.ContainsAny(w, "*?[") {
			return fmt.Errorf("%q: unsupported in the build stage", w)
		}
	}
	srcs, dest := words[:len(words)-1], words[len(words)-1]
	if path.IsAbs(dest) {
		return fmt.Errorf("dest %s: want it relative to WORKDIR", dest)
	}
	toDir := strings.HasSuffix(dest, "/") || dest == "." || len(srcs) > 1
	for _, src := range srcs {
		clean := path.Clean(src)
		if path.IsAbs(clean) || clean == ".." || strings.HasPrefix(clean, "../") {
			return fmt.Errorf("%s is outside the build context", src)
		}
		from := filepath.Join(context, filepath.FromSlash(clean))
		info, err := os.Stat(from)
		if err != nil {
			return err
		}
		to := filepath.Join(workdir, filepath.FromSlash(dest))
		if info.IsDir() {
			err = os.CopyFS(to, os.DirFS(from))
		} else {
			if toDir {
				to = filepath.Join(to, path.Base(clean))
			}
			err = copyRegular(from, to)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// copyRegular copies one file, creating its directory.
func copyRegular(from, to string) error {
	data, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		return err
	}
	return os.WriteFile(to, data, 0o644)
}

// flag returns the value of a go build flag (-name value or -name=value;
// "true" for the boolean flags), and whether it is present.
func (d dockerfile) flag(name string) (string, bool) {
	boolean := map[string]bool{"-trimpath": true, "-a": true, "-race": true, "-v": true, "-x": true, "-n": true, "-buildvcs": true}
	for i, a := range d.buildArgs {
		switch {
		case a == name && boolean[name]:
			return "true", true
		case a == name && i+1 < len(d.buildArgs):
			return d.buildArgs[i+1], true
		case strings.HasPrefix(a, name+"="):
			return strings.TrimPrefix(a, name+"="), true
		}
	}
	return "", false
}

// The build stage runs on the build machine's platform and cross-compiles
// for the target's (no emulation), with the release build flags read from
// their one definition, internal/buildflags/flags.env: the flags the tests'
// binary (internal/testing/fleet), make build and GoReleaser use too.
func TestDockerfileCrossCompilesWithTheReleaseFlags(t *testing.T) {
	b := docker.buildStage
	if b.platform != "$BUILDPLATFORM" {
		t.Errorf("build stage FROM --platform=%q, want $BUILDPLATFORM (compile natively, for the target's GOOS/GOARCH)", b.platform)
	}
	for _, arg := range []string{"TARGETOS", "TARGETARCH"} {
		if !slices.Contains(b.args, arg) {
			t.Errorf("build stage ARGs %v: want %s declared (BuildKit sets it; a stage sees it only once declared)", b.args, arg)
		}
	}
	for _, want := range []string{"GOOS=$TARGETOS", "GOARCH=$TARGETARCH"} {
		if !slices.Contains(docker.buildEnvRaw, want) {
			t.Errorf("build line environment %v: want %s", docker.buildEnvRaw, want)
		}
	}
	if !slices.Contains(docker.sourced, buildflags.File) {
		t.Errorf("build line sources %v: want %s, the one definition of the build flags", docker.sourced, buildflags.File)
	}
	f := buildflags.Release()
	for _, e := range f.Env() {
		if !slices.Contains(docker.buildEnv, e) {
			t.Errorf("build line environment %v: want %s (%s)", docker.buildEnv, e, buildflags.File)
		}
	}
	out, _ := docker.flag("-o")
	if want := append(f.Args(version), "-o", out, "./cmd/sidecar"); !slices.Equal(docker.buildArgs, want) {
		t.Errorf("go build %q, want %q (%s, VERSION stamped)", docker.buildArgs, want, buildflags.File)
	}
	if path.Base(out) != "leasehold" {
		t.Errorf("the binary is %s, want it named leasehold", out)
	}
}

// The image carries the OCI annotations a registry and a scanner read:
// where its source is, which version and commit it is (make image's VERSION
// and REVISION), under which license.
func TestDockerfileLabelsTheImage(t *testing.T) {
	want := map[string]string{
		"org.opencontainers.image.title":    "leasehold",
		"org.opencontainers.image.source":   "https://github.com/leasehold/leasehold",
		"org.opencontainers.image.version":  version,
		"org.opencontainers.image.revision": revision,
		"org.opencontainers.image.created":  created,
		"org.opencontainers.image.licenses": "Apache-2.0",
	}
	for key, value := range want {
		if got, ok := docker.labels[key]; !ok || got != value {
			t.Errorf("final stage LABEL %s=%q, want %q", key, got, value)
		}
	}
	if docker.labels["org.opencontainers.image.description"] == "" {
		t.Errorf("final stage LABEL org.opencontainers.image.description is missing")
	}
	license, err := os.ReadFile(filepath.Join(root, "LICENSE"))
	if err != nil || !strings.Contains(string(license), "Apache License\n                           Version 2.0, January 2004") {
		t.Errorf("LICENSE is not the Apache License 2.0 the image's licenses label names: %v", err)
	}
}

// The parser reads the shell the Dockerfile may use as sh does, and refuses
// the rest.
func TestShellWords(t *testing.T) {
	vars := map[string]string{"A": "x y", "E": ""}
	lookup := func(name string) (string, error) {
		if v, ok := vars[name]; ok {
			return v, nil
		}
		return "", fmt.Errorf("$%s unset", name)
	}
	for line, want := range map[string][][]string{
		`go build $A -o "$A" '$A' ${A}z`: {{"go", "build", "x", "y", "-o", "x y", "$A", "x", "yz"}},
		`. ./f && X=$E go build $E -v`:   {{".", "./f"}, {"X=", "go", "build", "-v"}},
		`a "b && c"`:                     {{"a", "b && c"}},
	} {
		got, err := shellCommands(line, lookup)
		if err != nil || !slices.EqualFunc(got, want, slices.Equal) {
			t.Errorf("shellCommands(%q) = %q, %v, want %q", line, got, err, want)
		}
	}
	for _, line := range []string{"a; b", "a | b", "a $(b)", "a `b`", "a > f", "a && ", "a $B", `a "b`, "a ${A:-x}", "a *", `a \b`} {
		if got, err := shellCommands(line, lookup); err == nil {
			t.Errorf("shellCommands(%q) = %q, want an error", line, got)
		}
	}
}
