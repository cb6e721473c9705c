package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// Exit statuses of `leasehold install`.
const (
	installOK     = 0
	installFailed = 1
	installUsage  = 2
)

// installCommand is `leasehold install <path>` (args are those after
// "install"): it copies the running binary to path atomically (a temporary
// file in the same folder, mode 0755, synced, then renamed), so that an init
// container can share the binary with the app container through an
// emptyDir: the image is the binary alone, with no cp and no shell. When
// path is an existing folder, the copy is <path>/leasehold, as install(1)
// copies into a folder. It returns 0, 1 for a failure, 2 for a usage error.
func installCommand(args []string, stderr io.Writer) int {
	const usage = "usage: leasehold install PATH|DIR"
	if len(args) != 1 || args[0] == "" || args[0][0] == '-' {
		fmt.Fprintf(stderr, "leasehold install: want exactly one argument, the destination PATH or DIR (%s)\n", usage)
		return installUsage
	}
	if err := install(args[0]); err != nil {
		fmt.Fprintln(stderr, "leasehold install:", err)
		return installFailed
	}
	return installOK
}

// installedName is the file name `leasehold install DIR` writes in DIR.
const installedName = "leasehold"

func install(dst string) (err error) {
	if info, serr := os.Stat(dst); serr == nil && info.IsDir() {
		dst = filepath.Join(dst, installedName)
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find the running binary: %w", err)
	}
	src, err := os.Open(self)
	if err != nil {
		return err
	}
	defer src.Close()
	tmp, err := os.CreateTemp(filepath.Dir(dst), "."+filepath.Base(dst)+".tmp-")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err = io.Copy(tmp, src); err != nil {
		return fmt.Errorf("copy %s to %s: %w", self, tmp.Name(), err)
	}
	if err = tmp.Chmod(0o755); err != nil {
		return err
	}
	if err = tmp.Sync(); err != nil {
		return err
	}
	if err = tmp.Close(); err != nil {
		return err
	}
	if err = os.Rename(tmp.Name(), dst); err != nil {
		return err
	}
	// Make the rename durable too; a folder that cannot be synced (some
	// file systems) is not an error.
	if dir, derr := os.Open(filepath.Dir(dst)); derr == nil {
		_ = dir.Sync()
		dir.Close()
	}
	return nil
}
