// Package kubetest runs a real etcd and kube-apiserver on loopback for
// integration tests, so that tests meet the behaviour a fake clientset does
// not have: optimistic concurrency (409 on a stale resourceVersion), MicroTime
// parsing, RBAC decisions and watch semantics.
//
// A test package starts one Cluster in TestMain and stops it when its tests
// end. The binaries are built from the Go module proxy by `make kube-bins`
// (see hack/kube) and found through $LEASEHOLD_KUBE_ASSETS, or else in
// <module root>/.cache/kube/current.
//
// Contracts:
//   - Stop stops the apiserver before etcd (an apiserver whose etcd vanished
//     hangs on SIGTERM) and kills either one after a bounded wait; children
//     also die with the test binary (Pdeathsig), so no process is left behind.
//   - Users are authenticated by client certificates signed by the cluster's
//     own CA and authorized by RBAC only: a user bound to nothing may do nothing.
//   - Fault hooks: StopAPIServer and StartAPIServer restart the apiserver on
//     the same port with the same etcd; Proxy black-holes one client's traffic.
package kubetest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// AssetsEnv names the environment variable that points at the folder holding
// the etcd and kube-apiserver binaries.
const AssetsEnv = "LEASEHOLD_KUBE_ASSETS"

const (
	stopGrace    = 10 * time.Second // SIGTERM → SIGKILL
	readyTimeout = 90 * time.Second // generous: CI machines are shared
)

// Options tune Start. The zero value is ready to use.
type Options struct {
	// AssetsDir overrides where the binaries are looked up.
	AssetsDir string
	// ExtraAPIServerArgs are appended to the apiserver's flags.
	ExtraAPIServerArgs []string
}

// Cluster is a running etcd + kube-apiserver pair. Its methods are safe for
// concurrent use.
type Cluster struct {
	dir     string
	ip      net.IP // the loopback address etcd and the apiserver listen on
	ca      *authority
	apiBin  string
	apiArgs []string
	host    string // https://<ip>:<port>
	etcd    *process
	admin   *User

	mu        sync.Mutex // guards apiserver
	apiserver *process
}

// Start launches etcd and kube-apiserver on free loopback ports with RBAC on,
// and returns once the apiserver reports ready and its bootstrap namespaces
// and RBAC roles exist. On error nothing is left running.
func Start(ctx context.Context, opts Options) (_ *Cluster, err error) {
	assets, err := assetsDir(opts.AssetsDir)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "leasehold-kube-")
	if err != nil {
		return nil, err
	}
	c := &Cluster{dir: dir, ip: privateLoopback(), apiBin: filepath.Join(assets, "kube-apiserver")}
	defer func() {
		if err != nil {
			err = errors.Join(err, c.Stop())
		}
	}()
	if c.ca, err = newAuthority(); err != nil {
		return nil, err
	}
	if err = c.startEtcd(filepath.Join(assets, "etcd")); err != nil {
		return nil, err
	}
	if err = c.configureAPIServer(opts.ExtraAPIServerArgs); err != nil {
		return nil, err
	}
	if c.admin, err = c.User("leasehold-admin", "system:masters"); err != nil {
		return nil, err
	}
	if err = c.StartAPIServer(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *Cluster) startEtcd(bin string) error {
	clientPort, err := freePortOn(c.ip)
	if err != nil {
		return err
	}
	peerPort, err := freePortOn(c.ip)
	if err != nil {
		return err
	}
	clientURL := "http://" + net.JoinHostPort(c.ip.String(), strconv.Itoa(clientPort))
	peerURL := "http://" + net.JoinHostPort(c.ip.String(), strconv.Itoa(peerPort))
	args := []string{
		"--name=default",
		"--data-dir=" + filepath.Join(c.dir, "etcd"),
		"--listen-client-urls=" + clientURL,
		"--advertise-client-urls=" + clientURL,
		"--listen-peer-urls=" + peerURL,
		"--initial-advertise-peer-urls=" + peerURL,
		"--initial-cluster=default=" + peerURL,
		"--unsafe-no-fsync=true", // test data need not survive a machine crash
		"--log-level=warn",
	}
	c.etcd, err = startProcess("etcd", bin, args, filepath.Join(c.dir, "etcd.log"))
	if err != nil {
		return err
	}
	c.apiArgs = append(c.apiArgs, "--etcd-servers="+clientURL)
	return nil
}

// configureAPIServer writes the apiserver's keys and fixes its flags once, so
// that every restart serves the same port, certificate and etcd.
func (c *Cluster) configureAPIServer(extra []string) error {
	port, err := freePortOn(c.ip)
	if err != nil {
		return err
	}
	serving, err := c.ca.serving(c.ip)
	if err != nil {
		return err
	}
	files := map[string][]byte{
		"ca.crt":      c.ca.certPEM,
		"serving.crt": serving.certPEM,
		"serving.key": serving.keyPEM,
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(c.dir, name), data, 0o600); err != nil {
			return err
		}
	}
	saKey, saPub := filepath.Join(c.dir, "sa.key"), filepath.Join(c.dir, "sa.pub")
	if err := writeServiceAccountKeys(saKey, saPub); err != nil {
		return err
	}
	c.host = "https://" + net.JoinHostPort(c.ip.String(), strconv.Itoa(port))
	c.apiArgs = append(c.apiArgs,
		"--bind-address="+c.ip.String(),
		"--advertise-address="+c.ip.String(),
		"--endpoint-reconciler-type=none", // a loopback address may not back the kubernetes Service
		"--secure-port="+strconv.Itoa(port),
		"--tls-cert-file="+filepath.Join(c.dir, "serving.crt"),
		"--tls-private-key-file="+filepath.Join(c.dir, "serving.key"),
		"--client-ca-file="+filepath.Join(c.dir, "ca.crt"),
		"--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file="+saPub,
		"--service-account-signing-key-file="+saKey,
		"--service-cluster-ip-range=10.96.0.0/24",
		"--cert-dir="+filepath.Join(c.dir, "certs"),
	)
	c.apiArgs = append(c.apiArgs, extra...)
	return nil
}

// StartAPIServer starts the apiserver (again) on its port and waits until it
// is ready. It is a fault hook: pair it with StopAPIServer to simulate an
// outage. Starting a running apiserver is an error.
func (c *Cluster) StartAPIServer(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.apiserver != nil && c.apiserver.running() {
		return errors.New("kubetest: apiserver already running")
	}
	p, err := startProcess("kube-apiserver", c.apiBin, c.apiArgs, filepath.Join(c.dir, "kube-apiserver.log"))
	if err != nil {
		return err
	}
	c.apiserver = p
	if err := c.waitReady(ctx, p); err != nil {
		return fmt.Errorf("kube-apiserver not ready: %w\n--- last lines of %s:\n%s", err, p.logPath, LogTail(p.logPath, 30))
	}
	return nil
}

// StopAPIServer stops the apiserver and leaves etcd running, so a later
// StartAPIServer finds all data where it was.
func (c *Cluster) StopAPIServer() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.apiserver == nil {
		return nil
	}
	return c.apiserver.stop(stopGrace)
}

func (c *Cluster) waitReady(ctx context.Context, p *process) error {
	cs, err := kubernetes.NewForConfig(c.admin.Config)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	var lastErr error
	err = wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if !p.running() {
			return false, fmt.Errorf("exited: %v", p.waitErr)
		}
		if lastErr = cs.Discovery().RESTClient().Get().AbsPath("/readyz").Do(ctx).Error(); lastErr != nil {
			return false, nil
		}
		// /readyz covers the RBAC bootstrap hook; the default namespace is made
		// by a controller that may run a moment later.
		_, lastErr = cs.CoreV1().Namespaces().Get(ctx, metav1.NamespaceDefault, metav1.GetOptions{})
		return lastErr == nil, nil
	})
	if err != nil && lastErr != nil {
		return fmt.Errorf("%w (last error: %v)", err, lastErr)
	}
	return err
}

// Stop stops the apiserver, then etcd, and removes the cluster's files. It
// is safe to call more than once.
func (c *Cluster) Stop() error {
	var errs []error
	c.mu.Lock()
	if c.apiserver != nil {
		errs = append(errs, c.apiserver.stop(stopGrace))
	}
	c.mu.Unlock()
	if c.etcd != nil {
		errs = append(errs, c.etcd.stop(stopGrace))
	}
	errs = append(errs, os.RemoveAll(c.dir))
	return errors.Join(errs...)
}

// Host is the apiserver's URL.
func (c *Cluster) Host() string { return c.host }

// Admin is a user in system:masters: every request is allowed.
func (c *Cluster) Admin() *User { return c.admin }

// Clientset returns an admin clientset.
func (c *Cluster) Clientset() *kubernetes.Clientset {
	cs, err := kubernetes.NewForConfig(c.admin.Config)
	if err != nil {
		panic(fmt.Sprintf("kubetest: admin config is invalid: %v", err)) // built by Start, never invalid
	}
	return cs
}

// PIDs returns the process IDs of the running etcd and apiserver, so tests
// can prove that Stop leaves nothing behind.
func (c *Cluster) PIDs() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	var pids []int
	for _, p := range []*process{c.etcd, c.apiserver} {
		if p != nil && p.running() {
			pids = append(pids, p.cmd.Process.Pid)
		}
	}
	return pids
}

// CreateNamespace creates a namespace with a generated name that starts with
// prefix, so that tests sharing a cluster never see each other's objects.
func (c *Cluster) CreateNamespace(ctx context.Context, prefix string) (string, error) {
	ns, err := c.Clientset().CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", err
	}
	return ns.Name, nil
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort() (int, error) { return freePortOn(net.IPv4(127, 0, 0, 1)) }

func freePortOn(ip net.IP) (int, error) {
	l, err := net.ListenTCP("tcp", &net.TCPAddr{IP: ip})
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// privateLoopback returns a random address in 127.0.0.0/8 other than
// 127.0.0.1, for one cluster's etcd and apiserver. A port picked free there
// stays free until the process binds it, and again while a fault test
// keeps the apiserver down: other tests listen on 127.0.0.1, and outgoing
// connections take their ports from 127.0.0.1 too (Linux's source address
// for every loopback destination).
func privateLoopback() net.IP {
	return net.IPv4(127, byte(1+rand.IntN(254)), byte(rand.IntN(256)), byte(1+rand.IntN(254)))
}

// restConfig returns the rest.Config of a client certificate against host.
func (c *Cluster) restConfig(host string, creds keyPair) *rest.Config {
	return &rest.Config{
		Host: host,
		TLSClientConfig: rest.TLSClientConfig{
			CAData:   c.ca.certPEM,
			CertData: creds.certPEM,
			KeyData:  creds.keyPEM,
		},
		QPS:   -1, // tests measure the server, not client-side throttling
		Burst: -1,
	}
}
