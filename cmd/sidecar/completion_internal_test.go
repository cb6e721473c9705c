package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// complete loads the bash script and returns what it completes for the
// command line words (the last one is the word being completed).
func complete(t *testing.T, script string, words ...string) []string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "leasehold.bash")
	if err := os.WriteFile(path, []byte(script), 0o600); err != nil {
		t.Fatal(err)
	}
	quoted := make([]string, len(words))
	for i, w := range words {
		quoted[i] = "'" + w + "'"
	}
	cmd := exec.CommandContext(t.Context(), "bash", "--norc", "--noprofile", "-c",
		`source "$1" && COMP_WORDS=(`+strings.Join(quoted, " ")+`) && COMP_CWORD=$((${#COMP_WORDS[@]} - 1)) && { _leasehold; printf '%s\n' "${COMPREPLY[@]}"; }`,
		"bash", path)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("bash: %v\n%s", err, out)
	}
	return strings.Fields(string(out))
}

// leasehold completion bash completes, in a real bash, the commands, each
// command's flags (as its help lists them), -o's values, the commands
// after help and the shells after completion.
func TestBashCompletion(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	r := invoke(t, nil, "completion", "bash")
	if r.code != exitDone || r.stderr != "" {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	var names []string
	for _, c := range commands() {
		names = append(names, c.name)
	}
	for _, tc := range []struct {
		words []string
		want  []string
	}{
		{[]string{"leasehold", ""}, names},
		{[]string{"leasehold", "st"}, []string{"status"}},
		{[]string{"leasehold", "c"}, []string{"completion"}},
		{[]string{"leasehold", "status", "-"}, []string{"--addr", "-o", "--lease"}},
		{[]string{"leasehold", "wait", "--"}, []string{"--addr", "--lease", "--timeout"}},
		{[]string{"leasehold", "release", "--"}, []string{"--addr", "--for", "--lease", "--to"}},
		{[]string{"leasehold", "run", "--e"}, []string{"--each"}},
		{[]string{"leasehold", "token", "-o", ""}, []string{"text", "json"}},
		{[]string{"leasehold", "help", "ru"}, []string{"run"}},
		{[]string{"leasehold", "completion", ""}, []string{"bash", "zsh"}},
		{[]string{"leasehold", "completion", "bash", ""}, nil},
	} {
		got := complete(t, r.stdout, tc.words...)
		slices.Sort(got)
		want := slices.Sorted(slices.Values(tc.want))
		if !slices.Equal(got, want) {
			t.Errorf("%q: completes %q, want %q", tc.words, got, want)
		}
	}
}

// leasehold completion zsh names every command with its summary and every
// command's flags, and is valid zsh (checked by zsh -n where zsh is
// installed).
func TestZshCompletion(t *testing.T) {
	r := invoke(t, nil, "completion", "zsh")
	if r.code != exitDone || r.stderr != "" || !strings.HasPrefix(r.stdout, "#compdef leasehold\n") {
		t.Fatalf("exit %d, stderr %q, script %q", r.code, r.stderr, r.stdout)
	}
	for _, c := range completionCommands(func(string) string { return "" }) {
		if !strings.Contains(r.stdout, zshQuote(c.name+":"+c.summary)) {
			t.Errorf("the script does not describe %s", c.name)
		}
		if len(c.flags) > 0 && !strings.Contains(r.stdout, "        "+c.name+") compadd -- "+strings.Join(c.flags, " ")+" ;;\n") {
			t.Errorf("the script does not complete %s's flags %v", c.name, c.flags)
		}
	}
	if !strings.Contains(r.stdout, "        release) compadd -- --addr --for --lease -o --to ;;\n") {
		t.Errorf("release's flags are not completed:\n%s", r.stdout)
	}
	zsh, err := exec.LookPath("zsh")
	if err != nil {
		t.Log("no zsh: its syntax is not checked")
		return
	}
	path := filepath.Join(t.TempDir(), "_leasehold")
	if err := os.WriteFile(path, []byte(r.stdout), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.CommandContext(t.Context(), zsh, "-n", path).CombinedOutput(); err != nil {
		t.Errorf("zsh -n: %v\n%s", err, out)
	}
}

// completion takes exactly one known shell.
func TestCompletionUsageErrors(t *testing.T) {
	for _, args := range [][]string{{"completion"}, {"completion", "fish"}, {"completion", "bash", "zsh"}} {
		r := invoke(t, nil, args...)
		if r.code != exitUsage || r.stdout != "" || !strings.HasPrefix(r.stderr, "leasehold completion: ") {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit 2 and the error", args, r.code, r.stdout, r.stderr)
		}
	}
}
