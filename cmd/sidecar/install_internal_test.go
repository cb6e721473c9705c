package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// leasehold install copies the running binary, mode 0755: to a new path,
// over an existing file, and into an existing folder as DIR/leasehold
// (rather than failing to rename onto the folder).
func TestInstallCopiesTheBinary(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	existing := filepath.Join(dir, "old")
	if err := os.WriteFile(existing, []byte("stale"), 0o644); err != nil {
		t.Fatal(err)
	}
	folder := filepath.Join(dir, "bin")
	if err := os.Mkdir(folder, 0o755); err != nil {
		t.Fatal(err)
	}
	for arg, path := range map[string]string{
		filepath.Join(dir, "new"): filepath.Join(dir, "new"),
		existing:                  existing,
		folder:                    filepath.Join(folder, "leasehold"),
		folder + "/":              filepath.Join(folder, "leasehold"),
	} {
		if r := invoke(t, nil, "install", arg); r.code != installOK || r.stderr != "" {
			t.Fatalf("install %s: exit %d, stderr %q", arg, r.code, r.stderr)
		}
		got, err := os.ReadFile(path)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("install %s: %s is not the binary (%d bytes, %v)", arg, path, len(got), err)
		}
		if info, _ := os.Stat(path); info.Mode().Perm() != 0o755 {
			t.Errorf("install %s: mode %v, want 0755", arg, info.Mode().Perm())
		}
	}
	entries, _ := os.ReadDir(folder)
	if len(entries) != 1 {
		t.Errorf("the folder holds %d entries, want the binary alone (no temporary file left)", len(entries))
	}
	if r := invoke(t, nil, "install", filepath.Join(dir, "missing", "leasehold")); r.code != installFailed {
		t.Errorf("install into a missing folder: exit %d, want 1", r.code)
	}
}
