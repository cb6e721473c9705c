package buildflags

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// flags.env holds a static, path-free, stripped build.
func TestReleaseFlags(t *testing.T) {
	f := Release()
	if f.CGOEnabled != "0" {
		t.Errorf("CGO_ENABLED=%s, want 0 (a static binary, alone in the image)", f.CGOEnabled)
	}
	if !slices.Contains(f.Flags, "-trimpath") {
		t.Errorf("flags %q: want -trimpath", f.Flags)
	}
	if got, want := f.Args("v1.2.3"), append(slices.Clone(f.Flags), "-ldflags", f.LDFlags+" -X main.version=v1.2.3"); !slices.Equal(got, want) {
		t.Errorf("Args = %q, want %q", got, want)
	}
	for _, flag := range f.Flags {
		if strings.ContainsAny(flag, " \t'\"") {
			t.Errorf("flag %q: GoReleaser passes BUILD_FLAGS through GOFLAGS, whose flags cannot hold spaces or quotes", flag)
		}
	}
}

// sh reads flags.env exactly as Parse does (the Dockerfile sources it).
func TestShellReadsTheSameValues(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	vars, err := Parse(flagsEnv)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range vars {
		out, err := exec.Command(sh, "-c", `. ./flags.env && printf %s "$`+name+`"`).CombinedOutput()
		if err != nil {
			t.Fatalf("sh: . ./flags.env: %v\n%s", err, out)
		}
		if string(out) != want {
			t.Errorf("sh reads %s=%q, Parse %q", name, out, want)
		}
	}
}

func TestParseRejectsWhatShAndParseMightReadDifferently(t *testing.T) {
	for _, line := range []string{
		`A="x y"`, `A=x y`, `A=$B`, "A=`x`", `A='x'y`, `export A='x'`, `A='x' # c`, `A=x;B=y`, `A='x`, `A='x'` + "\nA='y'",
	} {
		if _, err := Parse(line); err == nil {
			t.Errorf("Parse(%q): no error", line)
		}
	}
	vars, err := Parse("# c\n\nA='x y'\nB=-z\nC=''\n")
	if err != nil || vars["A"] != "x y" || vars["B"] != "-z" || vars["C"] != "" || len(vars) != 3 {
		t.Errorf("Parse = %v, %v", vars, err)
	}
}
