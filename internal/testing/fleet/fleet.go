// Package fleet runs real leasehold sidecar processes (the built binary)
// against a kubetest cluster, each with its own API and OPS ports and,
// optionally, its own cuttable proxy to the apiserver. The demo, the
// benchmarks and the end-to-end tests drive sidecars through it exactly as a
// pod would: environment variables in, HTTP and signals out.
package fleet

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/leasehold/leasehold/internal/buildflags"
	"github.com/leasehold/leasehold/internal/httpapi"
	"github.com/leasehold/leasehold/internal/testing/kubetest"
)

// Build compiles cmd/sidecar into dir as leasehold, the name it ships
// under, with the release build flags (internal/buildflags: the
// Dockerfile's, GoReleaser's and make build's; CGO_ENABLED=0 -trimpath: a
// static binary) and the version "test", and returns the binary's path.
// Tests run what ships: it builds in the leasehold module's own directory,
// with the product's go.mod, also when called from a module that requires
// it (the bench).
func Build(ctx context.Context, dir string) (string, error) {
	root, err := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}", "github.com/leasehold/leasehold").Output()
	if err != nil {
		return "", fmt.Errorf("go list -m github.com/leasehold/leasehold: %w", err)
	}
	return build(ctx, strings.TrimSpace(string(root)), filepath.Join(dir, "leasehold"), "./cmd/sidecar")
}

// BuildCommand compiles the main package pkg of the current module into
// dir the same way, and returns the binary's path (named after the
// package's last element).
func BuildCommand(ctx context.Context, dir, pkg string) (string, error) {
	return build(ctx, "", filepath.Join(dir, filepath.Base(pkg)), pkg)
}

// build runs go build in the directory in ("": the current one).
func build(ctx context.Context, in, bin, pkg string) (string, error) {
	flags := buildflags.Release()
	cmd := exec.CommandContext(ctx, "go", slices.Concat([]string{"build"}, flags.Args("test"), []string{"-o", bin, pkg})...)
	cmd.Dir = in
	cmd.Env = append(os.Environ(), flags.Env()...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %w\n%s", pkg, err, out)
	}
	return bin, nil
}

// Config is shared by every instance of a fleet.
type Config struct {
	Binary    string
	Cluster   *kubetest.Cluster
	User      *kubetest.User // credentials; nil means the cluster's admin
	Namespace string
	Lease     string
	// Timings; zero means the sidecar's defaults.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	Env                                       []string // extra LEASEHOLD_* settings
	Dir                                       string   // where logs go
	// ReadyPoll is how often Start asks /readyz; zero means 20ms. The
	// benchmarks time the start to readiness with a shorter one.
	ReadyPoll time.Duration
	// Unready makes Start return once the sidecar serves its OPS port
	// (any answer to /readyz), without waiting for it to be ready: for
	// tests of a sidecar that must never get ready (e.g. forbidden to list
	// its Leases).
	Unready bool
}

// Instance is one running sidecar.
type Instance struct {
	Name    string // POD_NAME; the identity is Name + "_" + a random suffix
	APIURL  string // http://127.0.0.1:<port>
	OpsURL  string
	Proxy   *kubetest.Proxy // this instance's own link to the apiserver, if any
	LogPath string
	// Started is when the process was started, Ready when Start saw its
	// first accepted /readyz 200 (monotonic readings).
	Started, Ready time.Time

	cmd    *exec.Cmd
	exited chan struct{}
	state  *os.ProcessState
}

// maxStartAttempts bounds the starts of one instance whose free ports were
// taken by another process between being picked and being bound.
const maxStartAttempts = 3

// errPortTaken reports a start that failed because a picked port was taken.
var errPortTaken = errors.New("fleet: a picked port was taken before the sidecar bound it")

// Start launches one sidecar named name and waits until it is ready
// (/readyz). With viaProxy its apiserver traffic crosses its own Proxy.
// Ports are picked free and then bound by the sidecar, so another process
// can take one in between; such a start is tried again with new ports.
func (c Config) Start(ctx context.Context, name string, viaProxy bool) (*Instance, error) {
	for attempt := 1; ; attempt++ {
		inst, err := c.start(ctx, name, viaProxy)
		if !errors.Is(err, errPortTaken) || attempt == maxStartAttempts {
			return inst, err
		}
	}
}

// start is one attempt of Start.
func (c Config) start(ctx context.Context, name string, viaProxy bool) (*Instance, error) {
	user := c.User
	if user == nil {
		user = c.Cluster.Admin()
	}
	inst := &Instance{Name: name, LogPath: filepath.Join(c.Dir, name+".log"), exited: make(chan struct{})}
	var err error
	if viaProxy {
		// The proxy takes its port first, so the free ports picked below
		// cannot be the one it is given.
		if inst.Proxy, err = c.Cluster.NewProxy(); err != nil {
			return nil, err
		}
		if user, err = user.Through(inst.Proxy); err != nil {
			inst.Proxy.Close()
			return nil, err
		}
	}
	apiPort, err := kubetest.FreePort()
	if err != nil {
		inst.closeProxy()
		return nil, err
	}
	opsPort, err := kubetest.FreePort()
	if err != nil {
		inst.closeProxy()
		return nil, err
	}
	inst.APIURL = "http://127.0.0.1:" + strconv.Itoa(apiPort)
	inst.OpsURL = "http://127.0.0.1:" + strconv.Itoa(opsPort)
	env := []string{
		"PATH=" + os.Getenv("PATH"),
		"KUBECONFIG=" + user.Kubeconfig,
		"POD_NAME=" + name,
		"POD_NAMESPACE=" + c.Namespace,
		"LEASEHOLD_LEASE_NAME=" + c.Lease,
		"LEASEHOLD_API_ADDR=127.0.0.1:" + strconv.Itoa(apiPort),
		"LEASEHOLD_OPS_ADDR=127.0.0.1:" + strconv.Itoa(opsPort),
	}
	for v, d := range map[string]time.Duration{
		"LEASEHOLD_LEASE_DURATION": c.LeaseDuration,
		"LEASEHOLD_RENEW_DEADLINE": c.RenewDeadline,
		"LEASEHOLD_RETRY_PERIOD":   c.RetryPeriod,
	} {
		if d != 0 {
			env = append(env, v+"="+d.String())
		}
	}
	env = append(env, c.Env...)
	logFile, err := os.Create(inst.LogPath)
	if err != nil {
		inst.closeProxy()
		return nil, err
	}
	inst.cmd = exec.Command(c.Binary)
	inst.cmd.Env = env
	inst.cmd.Stdout, inst.cmd.Stderr = logFile, logFile
	inst.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	inst.Started = time.Now()
	if err := inst.cmd.Start(); err != nil {
		logFile.Close()
		inst.closeProxy()
		return nil, err
	}
	go func() {
		_ = inst.cmd.Wait() // the exit status is read from ProcessState
		inst.state = inst.cmd.ProcessState
		logFile.Close()
		close(inst.exited)
	}()
	if err := inst.waitReady(ctx, c.ReadyPoll, c.Unready); err != nil {
		inst.Stop()
		if inst.logged("address already in use") {
			err = fmt.Errorf("%w: %w", errPortTaken, err)
		}
		return nil, fmt.Errorf("%s not ready: %w (log: %s)", name, err, inst.LogPath)
	}
	return inst, nil
}

// waitReady waits until the instance answers /readyz with 200 (with
// unready, with any status), asking every poll (20ms when 0), and records
// when in Ready. The answer counts only once the instance has logged that it
// started, that is bound both its ports: a port picked free may have been
// taken by another sidecar, whose answer would otherwise pass for this one's.
func (i *Instance) waitReady(ctx context.Context, poll time.Duration, unready bool) error {
	if poll <= 0 {
		poll = 20 * time.Millisecond
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		if code, err := get(ctx, i.OpsURL+"/readyz", nil); err == nil && (code == http.StatusOK || unready) && i.logged("leasehold started") {
			i.Ready = time.Now()
			return nil
		}
		select {
		case <-i.exited:
			return fmt.Errorf("exited: %v", i.state)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(poll):
		}
	}
}

// logged reports whether the instance's log holds msg.
func (i *Instance) logged(msg string) bool {
	log, _ := os.ReadFile(i.LogPath)
	return bytes.Contains(log, []byte(msg))
}

// Status asks the instance's API for /v1/status.
func (i *Instance) Status(ctx context.Context) (httpapi.Status, error) {
	var st httpapi.Status
	code, err := get(ctx, i.APIURL+"/v1/status", &st)
	if err == nil && code != http.StatusOK {
		err = fmt.Errorf("GET /v1/status: %d", code)
	}
	return st, err
}

// Leases asks the instance's API for GET /v1/leases: every Lease's status
// (the unnamed /v1/status answers 409 with a lease group).
func (i *Instance) Leases(ctx context.Context) (httpapi.Leases, error) {
	var l httpapi.Leases
	code, err := get(ctx, i.APIURL+"/v1/leases", &l)
	if err == nil && code != http.StatusOK {
		err = fmt.Errorf("GET /v1/leases: %d", code)
	}
	return l, err
}

// ReadyNow asks the instance's OPS /readyz and reports whether it answered 200.
func (i *Instance) ReadyNow(ctx context.Context) (bool, error) {
	code, err := get(ctx, i.OpsURL+"/readyz", nil)
	return code == http.StatusOK, err
}

// Signal sends sig to the process (SIGKILL a crash, SIGTERM a graceful
// stop, SIGSTOP/SIGCONT a pause).
func (i *Instance) Signal(sig syscall.Signal) error { return i.cmd.Process.Signal(sig) }

// PID is the process ID, for reading its resource use from /proc.
func (i *Instance) PID() int { return i.cmd.Process.Pid }

// Exited is closed when the process has exited.
func (i *Instance) Exited() <-chan struct{} { return i.exited }

// ExitCode is the exit status once Exited is closed (-1 if killed by a signal).
func (i *Instance) ExitCode() int { return i.state.ExitCode() }

// Terminate sends SIGTERM and waits at most bound for the process to exit:
// how long it took, or an error naming the instance if it still runs.
func (i *Instance) Terminate(bound time.Duration) (time.Duration, error) {
	sent := time.Now()
	if err := i.Signal(syscall.SIGTERM); err != nil {
		return 0, err
	}
	select {
	case <-i.exited:
		return time.Since(sent), nil
	case <-time.After(bound):
		return 0, fmt.Errorf("%s still running %v after SIGTERM", i.Name, bound)
	}
}

// Stop kills the process if it still runs, waits for it, and closes its proxy.
func (i *Instance) Stop() {
	select {
	case <-i.exited:
	default:
		_ = i.cmd.Process.Signal(syscall.SIGCONT) // a paused process cannot die
		_ = i.cmd.Process.Kill()
		<-i.exited
	}
	i.closeProxy()
}

func (i *Instance) closeProxy() {
	if i.Proxy != nil {
		i.Proxy.Close()
	}
}

// get GETs url with a short timeout and decodes a JSON body into out (if
// not nil), whatever the status code.
func get(ctx context.Context, url string, out any) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	return getWait(ctx, url, out)
}

// getWait is get bounded by ctx alone, for long-polls.
func getWait(ctx context.Context, url string, out any) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if out != nil {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			return resp.StatusCode, fmt.Errorf("decode %s: %w", url, err)
		}
	}
	return resp.StatusCode, nil
}

// ErrNoLeader is returned by WaitLeader when no instance leads in time.
var ErrNoLeader = errors.New("fleet: no leader")

// WaitLeader polls the instances' status every interval until exactly one
// reports leader:true, and returns it with its status.
func WaitLeader(ctx context.Context, instances []*Instance, interval time.Duration) (*Instance, httpapi.Status, error) {
	for {
		var leader *Instance
		var status httpapi.Status
		leaders := 0
		for _, inst := range instances {
			if st, err := inst.Status(ctx); err == nil && st.Leader {
				leader, status = inst, st
				leaders++
			}
		}
		if leaders == 1 {
			return leader, status, nil
		}
		select {
		case <-ctx.Done():
			return nil, httpapi.Status{}, fmt.Errorf("%w: %w", ErrNoLeader, ctx.Err())
		case <-time.After(interval):
		}
	}
}

// LeasesAfter is GET /v1/leases?index=index&wait=wait, a blocking query: it
// answers at once when the instance's group index differs from index, else
// when it changes or wait has passed. It is bounded by ctx alone.
func (i *Instance) LeasesAfter(ctx context.Context, index uint64, wait time.Duration) (httpapi.Leases, error) {
	var l httpapi.Leases
	url := fmt.Sprintf("%s/v1/leases?index=%d&wait=%s", i.APIURL, index, wait)
	code, err := getWait(ctx, url, &l)
	if err == nil && code != http.StatusOK {
		err = fmt.Errorf("GET /v1/leases?index=%d: %d", index, code)
	}
	return l, err
}
