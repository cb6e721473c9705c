package runner

import (
	"errors"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/utils/clock"

	"github.com/leasehold/leasehold/internal/fence"
)

// Environment variables the command is started with.
const (
	EnvFencingToken = "LEASEHOLD_FENCING_TOKEN"
	EnvTerm         = "LEASEHOLD_TERM"
)

// ioWaitDelay bounds how long reaping waits for the command's output to be
// copied once it has exited, when its output is not a file (tests).
const ioWaitDelay = time.Second

// process is one run of the command, in a process group of its own whose
// ID is the command's PID.
type process struct {
	cmd     *exec.Cmd
	token   fence.Token
	started time.Time
	done    chan struct{} // closed once the command has exited and been reaped
	// hold is the sidecar's hold on the command's term, ended only once
	// the command has exited (endHold); nil when the sidecar has none.
	hold *hold
}

// startProcess starts path (the resolved command[0]) with command[1:] and
// env plus the term's token and number, in a new process group. The
// command is killed if the runner dies (Linux: PR_SET_PDEATHSIG).
func startProcess(path string, command, env []string, stdin io.Reader, stdout, stderr io.Writer, t *term, now time.Time) (*process, error) {
	cmd := exec.Command(path, command[1:]...)
	cmd.Args[0] = command[0]
	cmd.Env = commandEnv(env, t)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, stderr
	cmd.WaitDelay = ioWaitDelay
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &process{cmd: cmd, token: t.token, started: now, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait() // the status is read from cmd.ProcessState
		close(p.done)
	}()
	return p, nil
}

// commandEnv is env without any LEASEHOLD_FENCING_TOKEN or LEASEHOLD_TERM,
// plus the term's.
func commandEnv(env []string, t *term) []string {
	out := make([]string, 0, len(env)+2)
	for _, kv := range env {
		if strings.HasPrefix(kv, EnvFencingToken+"=") || strings.HasPrefix(kv, EnvTerm+"=") {
			continue
		}
		out = append(out, kv)
	}
	return append(out,
		EnvFencingToken+"="+t.token.String(),
		EnvTerm+"="+strconv.FormatInt(int64(t.number), 10))
}

// Done is closed once the command has exited; nil for a nil process, so a
// select never picks it.
func (p *process) Done() <-chan struct{} {
	if p == nil {
		return nil
	}
	return p.done
}

func (p *process) pid() int { return p.cmd.Process.Pid }

// status is the command's exit status once Done is closed: its exit code,
// or 128 + the signal number if a signal killed it (as shells report it).
func (p *process) status() int { return exitStatus(p.cmd.ProcessState) }

func exitStatus(state *os.ProcessState) int {
	if ws, ok := state.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return state.ExitCode()
}

// signalGroup sends sig to every process of the command's group.
func (p *process) signalGroup(sig syscall.Signal) error {
	return syscall.Kill(-p.pid(), sig)
}

// groupAlive reports whether any process of the command's group is left.
// After the command has been reaped its PID cannot be reused while its
// group has members, so the group ID still names only them.
func (p *process) groupAlive() bool {
	err := p.signalGroup(0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// stop ends the command: SIGTERM to its group, then SIGKILL to the group
// once grace has passed (on clk) if the command, or any process of its
// group, still runs. It returns once the command has been reaped. stopped
// is false if the command had already exited on its own.
func (p *process) stop(clk clock.Clock, grace time.Duration, log *slog.Logger) (stopped bool) {
	select {
	case <-p.done:
		return false
	default:
	}
	log = log.With("pid", p.pid())
	kill := alarm{clock: clk} // armed first: grace counts from before SIGTERM
	kill.set(clk.Now().Add(grace))
	defer kill.stop()
	if err := p.signalGroup(syscall.SIGTERM); err != nil {
		log.Warn("SIGTERM to the command's process group failed", "err", err)
	}
	select {
	case <-p.done:
	case <-kill.C():
		log.Warn("command still running after the grace period: SIGKILL to its process group", "grace", grace)
		if err := p.signalGroup(syscall.SIGKILL); err != nil {
			log.Warn("SIGKILL to the command's process group failed", "err", err)
		}
		<-p.done
		return true
	}
	if p.groupAlive() {
		<-kill.C()
		if p.groupAlive() {
			log.Warn("processes of the command's group still running after the grace period: SIGKILL", "grace", grace)
			_ = p.signalGroup(syscall.SIGKILL)
		}
	}
	return true
}

// killLeftovers SIGKILLs what is left of the group of a command that has
// exited on its own: its children must not outlive the runner's watch.
func (p *process) killLeftovers(log *slog.Logger) {
	if p.groupAlive() {
		log.Warn("processes of the command's group outlived it: SIGKILL", "pid", p.pid())
		_ = p.signalGroup(syscall.SIGKILL)
	}
}

// endHold ends the hold on the command's term, if any, once the command has
// exited: a release of the term that waited for it goes ahead.
func (p *process) endHold() {
	p.hold.close()
	p.hold = nil
}
