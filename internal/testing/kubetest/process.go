package kubetest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// process is one child (etcd or kube-apiserver) with its output in a log file.
type process struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	exited  chan struct{} // closed once Wait has returned
	waitErr error         // valid after exited is closed
}

// startProcess runs bin with args, appending its output to logPath. The child
// gets SIGKILL if the test binary dies first (Pdeathsig), so a crashed or
// killed test never leaves an etcd or apiserver behind.
func startProcess(name, bin string, args []string, logPath string) (*process, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, logPath: logPath, exited: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		logFile.Close()
		close(p.exited)
	}()
	return p, nil
}

// running reports whether the process has not exited yet.
func (p *process) running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// stop sends SIGTERM and waits up to grace for the process to exit, then
// sends SIGKILL and waits for it to be reaped. It returns only once the
// process is gone.
func (p *process) stop(grace time.Duration) error {
	if !p.running() {
		return nil
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("signal %s: %w", p.name, err)
	}
	select {
	case <-p.exited:
		return nil
	case <-time.After(grace):
	}
	if err := p.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("kill %s: %w", p.name, err)
	}
	<-p.exited
	return nil
}

// LogTail returns the last lines of a log file, or why it cannot be read,
// for error messages.
func LogTail(path string, lines int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	all := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}
