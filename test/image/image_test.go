// Package image_test proves what it can of the container image without a
// Docker engine: the Dockerfile's build stage builds (its RUN lines run in
// a clean directory holding only what it copies); the Dockerfile ships a
// static binary alone (FROM scratch) as uid 65532 with no shell; make image
// builds the same image with no engine, twice with the same digests; the
// binary built with exactly the flags of the
// Dockerfile's build line is static, stripped, path-free and stamped with
// its version; and it runs as uid/gid 65532 from a read-only directory
// (as with readOnlyRootFilesystem) against the real API server and leads.
package image_test

import (
	"bytes"
	"context"
	"debug/buildinfo"
	"debug/elf"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/leasehold/leasehold/internal/httpapi"
	"github.com/leasehold/leasehold/internal/testing/kubetest"
	"github.com/leasehold/leasehold/internal/testing/poll"
)

// nonroot is the image's user and group.
const nonroot = 65532

// version, revision and created are what the test passes as the
// Dockerfile's VERSION, REVISION and CREATED build arguments (and to make
// image: created is the commit time 1700000000).
const (
	version  = "v0.0.0-imagetest"
	revision = "0123456789abcdef0123456789abcdef01234567"
	created  = "2023-11-14T22:13:20Z"
)

// generous bounds real-time waits for what must happen (a command's exit,
// the binary's first leadership); it never decides an outcome.
const generous = 30 * time.Second

var (
	cluster *kubetest.Cluster
	root    string     // the module root
	docker  dockerfile // the parsed Dockerfile
	binary  string     // built with the Dockerfile's build line
)

func TestMain(m *testing.M) { os.Exit(testMain(m)) }

func testMain(m *testing.M) int {
	var err error
	if root, err = filepath.Abs(filepath.Join("..", "..")); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// The build arguments of `make image`, and those BuildKit sets for the
	// platform the tests run the binary on.
	buildArgs := map[string]string{"VERSION": version, "REVISION": revision, "CREATED": created, "TARGETOS": "linux", "TARGETARCH": runtime.GOARCH}
	if docker, err = parseDockerfile(root, "Dockerfile", buildArgs); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	dir, err := os.MkdirTemp("", "leasehold-image-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	// The binary every test here runs is the one the Dockerfile's build
	// stage builds from what it copies alone: a Dockerfile that cannot
	// build fails the whole package here.
	if binary, err = docker.build(context.Background(), filepath.Join(dir, "leasehold")); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return kubetest.Main(m, &cluster)
}

// The Dockerfile builds a static, path-free, version-stamped binary and
// ships it alone on an empty base (FROM scratch), as numeric user 65532, as the
// ENTRYPOINT in exec form: no shell in the image, none needed to start.
func TestDockerfileShipsAStaticBinaryAsNonRoot(t *testing.T) {
	if !slices.Contains(docker.buildEnv, "CGO_ENABLED=0") {
		t.Errorf("build line environment %v: want CGO_ENABLED=0 (a static binary)", docker.buildEnv)
	}
	if _, ok := docker.flag("-trimpath"); !ok {
		t.Errorf("build line %v: want -trimpath", docker.buildArgs)
	}
	if ld, _ := docker.flag("-ldflags"); !strings.Contains(ld, "-X main.version="+version) {
		t.Errorf("-ldflags %q: want the version stamped with -X main.version=${VERSION}", ld)
	}
	if docker.finalFrom != "scratch" {
		t.Errorf("final stage FROM %s, want scratch (the binary alone)", docker.finalFrom)
	}
	if !regexp.MustCompile(`^65532(:65532)?$`).MatchString(docker.finalUser) {
		t.Errorf("USER %q: want numeric 65532 (runAsNonRoot can only verify a numeric user)", docker.finalUser)
	}
	var entry []string
	if err := json.Unmarshal([]byte(docker.entrypoint), &entry); err != nil || len(entry) != 1 {
		t.Fatalf("ENTRYPOINT %s: want exec form with the binary alone (no shell): %v", docker.entrypoint, err)
	}
	out, _ := docker.flag("-o")
	wantCopy := "--from=build " + out + " " + entry[0]
	if !slices.Contains(docker.copies, wantCopy) || len(docker.copies) != 1 {
		t.Errorf("final stage COPY %q: want only %q", docker.copies, wantCopy)
	}
	for _, line := range docker.final {
		if strings.HasPrefix(strings.ToUpper(line), "RUN") {
			t.Errorf("final stage runs %q: the image has no shell", line)
		}
	}
}

// The binary built with the Dockerfile's flags is static (no interpreter,
// no dynamic section), stripped, carries no build path, and records those
// very flags and the stamped version.
func TestBinaryIsStaticStrippedAndStamped(t *testing.T) {
	f, err := elf.Open(binary)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Errorf("program header %v: a dynamically linked binary cannot run in an image without libc", p.Type)
		}
	}
	ldflags, _ := docker.flag("-ldflags")
	for _, s := range f.Sections {
		switch {
		case s.Name == ".interp" || s.Name == ".dynamic":
			t.Errorf("section %s: want a static binary", s.Name)
		case s.Name == ".symtab" && strings.Contains(ldflags, "-s"):
			t.Errorf("section %s: the Dockerfile strips the symbol table (-ldflags -s)", s.Name)
		case strings.HasPrefix(s.Name, ".debug_") || strings.HasPrefix(s.Name, ".zdebug_"):
			if strings.Contains(ldflags, "-w") {
				t.Errorf("section %s: the Dockerfile omits DWARF (-ldflags -w)", s.Name)
			}
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) != 0 {
		t.Errorf("imports shared libraries %v", libs)
	}
	data, err := os.ReadFile(binary)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(data, []byte(root+"/")) {
		t.Errorf("the binary contains the build path %s: want -trimpath", root)
	}

	info, err := buildinfo.ReadFile(binary)
	if err != nil {
		t.Fatal(err)
	}
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	// Go records -ldflags only without -trimpath (go.dev/issue/52372); the
	// sections above and the stamped version (TestImageBinaryReportsItsVersion)
	// show it.
	want := map[string]string{"CGO_ENABLED": "0", "-trimpath": "true"}
	if _, trimpath := docker.flag("-trimpath"); !trimpath {
		want["-ldflags"] = ldflags
	}
	for key, want := range want {
		if settings[key] != want {
			t.Errorf("build setting %s=%q, want %q (from the Dockerfile)", key, settings[key], want)
		}
	}
	t.Logf("%s, %s, %d MiB: %v", info.GoVersion, info.Path, len(data)>>20, settings)
}

// The image's binary runs as uid/gid 65532 from a read-only directory, as
// with runAsUser 65532 and readOnlyRootFilesystem, against the real API
// server: it becomes leader, reports the version it was stamped with, and
// releases the Lease on SIGTERM.
func TestRunsAsNonRootFromAReadOnlyDirectory(t *testing.T) {
	kubetest.Require(t, cluster)
	if os.Geteuid() != 0 {
		t.Skip("switching to uid 65532 needs root (CI runs as root)")
	}
	ns, err := cluster.CreateNamespace(t.Context(), "image")
	if err != nil {
		t.Fatal(err)
	}

	// A read-only "root filesystem": the binary and a kubeconfig readable
	// only by 65532, in a directory nobody but root may write.
	dir, err := os.MkdirTemp("", "leasehold-readonly-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	bin := filepath.Join(dir, "leasehold")
	copyFile(t, binary, bin, 0o555)
	kubeconfig := filepath.Join(dir, "kubeconfig")
	copyFile(t, cluster.Admin().Kubeconfig, kubeconfig, 0o400)
	if err := os.Chown(kubeconfig, nonroot, nonroot); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o555); err != nil {
		t.Fatal(err)
	}
	if _, err := clientcmd.BuildConfigFromFlags("", kubeconfig); err != nil {
		t.Fatal(err)
	}

	apiPort, err := kubetest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	opsPort, err := kubetest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	// The child writes its logs straight into a file (no copying goroutine
	// to race with), read only to explain a failure.
	logPath := filepath.Join(t.TempDir(), "sidecar.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	logs := func() string { return kubetest.LogTail(logPath, 40) }
	cmd := exec.Command(bin)
	cmd.Dir = dir
	cmd.Env = []string{
		"HOME=" + dir, "TMPDIR=" + dir, // nowhere to write, as in the image
		"KUBECONFIG=" + kubeconfig,
		"POD_NAME=image", "POD_NAMESPACE=" + ns,
		"LEASEHOLD_LEASE_NAME=image",
		"LEASEHOLD_API_ADDR=127.0.0.1:" + strconv.Itoa(apiPort),
		"LEASEHOLD_OPS_ADDR=127.0.0.1:" + strconv.Itoa(opsPort),
		"LEASEHOLD_LEASE_DURATION=3s", "LEASEHOLD_RENEW_DEADLINE=2s", "LEASEHOLD_RETRY_PERIOD=500ms",
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Credential: &syscall.Credential{Uid: nonroot, Gid: nonroot, Groups: []uint32{}},
		Pdeathsig:  syscall.SIGKILL,
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})

	api := "http://127.0.0.1:" + strconv.Itoa(apiPort)
	var st httpapi.Status
	poll.UntilReport(t, generous, 20*time.Millisecond, "leader", func() bool {
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("exited: %v\n%s", err, logs())
		default:
		}
		_ = getJSON(t, api+"/v1/status", &st)
		return st.Leader
	}, func() string { return fmt.Sprintf("%+v\n%s", st, logs()) })

	uid, gid := ids(t, cmd.Process.Pid)
	if uid != "65532" || gid != "65532" {
		t.Fatalf("runs as uid %s gid %s, want 65532", uid, gid)
	}
	lease, err := cluster.Clientset().CoordinationV1().Leases(ns).Get(t.Context(), "image", metav1.GetOptions{})
	if err != nil || *lease.Spec.HolderIdentity != st.Identity {
		t.Fatalf("Lease: %v, holder %v, want %s", err, lease.Spec.HolderIdentity, st.Identity)
	}
	metrics := getText(t, "http://127.0.0.1:"+strconv.Itoa(opsPort)+"/metrics")
	if !strings.Contains(metrics, `version="`+version+`"`) {
		t.Errorf("leasehold_build_info does not carry the stamped version %s", version)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		exited <- err
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v\n%s", err, logs())
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("still running 5s after SIGTERM\n%s", logs())
	}
	lease, err = cluster.Clientset().CoordinationV1().Leases(ns).Get(t.Context(), "image", metav1.GetOptions{})
	if err != nil || *lease.Spec.HolderIdentity != "" {
		t.Fatalf("after SIGTERM: %v, holder %q, want released", err, *lease.Spec.HolderIdentity)
	}
	t.Logf("uid/gid %s/%s from read-only %s: led with token %d, released on SIGTERM", uid, gid, dir, st.FencingToken)
}

// ids reads the real uid and gid of a process from /proc.
func ids(t *testing.T, pid int) (uid, gid string) {
	t.Helper()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(status)) {
		fields := strings.Fields(line)
		switch {
		case len(fields) > 1 && fields[0] == "Uid:":
			uid = fields[1]
		case len(fields) > 1 && fields[0] == "Gid:":
			gid = fields[1]
		}
	}
	return uid, gid
}

func copyFile(t *testing.T, from, to string, mode os.FileMode) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, data, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(to, mode); err != nil { // not subject to the umask
		t.Fatal(err)
	}
}

func getJSON(t *testing.T, url string, out any) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return json.NewDecoder(resp.Body).Decode(out)
}

func getText(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(body)
}
