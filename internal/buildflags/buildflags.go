// Package buildflags is the one definition of how the leasehold binary is
// built for release, read from flags.env (embedded here). The Makefile, the
// Dockerfile and .goreleaser.yaml read the same file; internal/testing/fleet builds
// the binary the tests run with Release(), so the tests run what ships.
package buildflags

import (
	_ "embed"
	"fmt"
	"regexp"
	"strings"
)

// File is flags.env's path from the module root.
const File = "internal/buildflags/flags.env"

//go:embed flags.env
var flagsEnv string

// Flags are the release build's settings, as flags.env defines them.
type Flags struct {
	CGOEnabled string   // BUILD_CGO_ENABLED: the value of CGO_ENABLED
	Flags      []string // BUILD_FLAGS: flags of go build
	LDFlags    string   // BUILD_LDFLAGS: linker flags, without the version
}

// Release returns the flags of the embedded flags.env. It panics if the file
// is malformed, which the package's tests rule out.
func Release() Flags {
	f, err := FromEnv(flagsEnv)
	if err != nil {
		panic(fmt.Sprintf("%s: %v", File, err))
	}
	return f
}

// FromEnv reads the flags from the text of a flags.env file.
func FromEnv(text string) (Flags, error) {
	vars, err := Parse(text)
	if err != nil {
		return Flags{}, err
	}
	for _, name := range []string{"BUILD_CGO_ENABLED", "BUILD_FLAGS", "BUILD_LDFLAGS"} {
		if _, ok := vars[name]; !ok {
			return Flags{}, fmt.Errorf("%s is not set", name)
		}
	}
	return Flags{
		CGOEnabled: vars["BUILD_CGO_ENABLED"],
		Flags:      strings.Fields(vars["BUILD_FLAGS"]),
		LDFlags:    vars["BUILD_LDFLAGS"],
	}, nil
}

// Env is the environment of the build: CGO_ENABLED.
func (f Flags) Env() []string { return []string{"CGO_ENABLED=" + f.CGOEnabled} }

// LDFlagsFor is the -ldflags value that stamps version into the binary.
func (f Flags) LDFlagsFor(version string) string {
	return strings.TrimSpace(f.LDFlags + " -X main.version=" + version)
}

// Args are the arguments of `go build` (after "build", before -o and the
// package) that stamp version into the binary.
func (f Flags) Args(version string) []string {
	return append(append([]string(nil), f.Flags...), "-ldflags", f.LDFlagsFor(version))
}

var assignment = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_]*)=(?:'([^']*)'|([^\s'"$\x60\\;&|<>(){}*?#~]*))$`)

// Parse reads the subset of shell that flags.env may hold: blank lines,
// comment lines, and NAME='value' (or NAME=word, a word without spaces,
// quotes or other shell syntax) assignments, which sh and a plain parser
// read alike. Anything else is an error.
func Parse(text string) (map[string]string, error) {
	vars := map[string]string{}
	for i, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		m := assignment.FindStringSubmatch(line)
		if m == nil {
			return nil, fmt.Errorf("line %d: %q: want NAME='value'", i+1, line)
		}
		if _, dup := vars[m[1]]; dup {
			return nil, fmt.Errorf("line %d: %s is set twice", i+1, m[1])
		}
		vars[m[1]] = m[2] + m[3]
	}
	return vars, nil
}
