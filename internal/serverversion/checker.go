package serverversion

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/version"
)

// Reader reads the apiserver's version (kubeclient.ServerVersion, GET
// /version: readable by every client, authenticated or not, under
// Kubernetes' default RBAC, the ClusterRole system:public-info-viewer).
type Reader func(ctx context.Context) (version.Info, error)

// Checker reads the apiserver's version once (Run), logs what Assess
// warns of, and keeps the Assessment for the status (Assessment) and the
// metrics (leasehold_apiserver_info, leasehold_apiserver_resource_versions_comparable).
type Checker struct {
	read    Reader
	timeout time.Duration
	log     *slog.Logger
	result  atomic.Pointer[Assessment] // nil until a read succeeded
}

// NewChecker returns a Checker that reads with read, each read bounded by
// timeout, and logs to log (nil: discarded). It registers its metrics in
// reg (nil: not registered); they have no series until a read succeeded.
func NewChecker(read Reader, timeout time.Duration, log *slog.Logger, reg prometheus.Registerer) (*Checker, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &Checker{read: read, timeout: timeout, log: log}
	if reg != nil {
		if err := reg.Register(collector{c}); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// Run reads the version once and returns: it logs the version at Info and
// each warning of Assess at Warn, or, when the version cannot be read (or
// parsed), that it could not and that the sidecar carries on without it.
// It never fails: the sidecar runs the same either way. ctx ending cuts the
// read short, and nothing is logged then.
func (c *Checker) Run(ctx context.Context) error {
	readCtx, cancel := context.WithTimeout(ctx, c.timeout)
	info, err := c.read(readCtx)
	cancel()
	if ctx.Err() != nil {
		return nil
	}
	if err != nil {
		c.log.Warn(unreadable, "err", err)
		return nil
	}
	a, err := Assess(info.GitVersion)
	if err != nil {
		c.log.Warn(unreadable, "err", err)
		return nil
	}
	c.result.Store(&a)
	c.log.Info("apiserver version", "gitVersion", a.GitVersion, "resourceVersionsComparable", a.ResourceVersionsComparable, "nativeSidecars", a.NativeSidecars)
	for _, w := range a.Warnings {
		c.log.Warn(w, "gitVersion", a.GitVersion)
	}
	return nil
}

// Assessment returns the apiserver's version as judged by Assess, and
// whether it is known: false until Run has read it, and for good when the
// read failed. Safe from any goroutine.
func (c *Checker) Assessment() (Assessment, bool) {
	a := c.result.Load()
	if a == nil {
		return Assessment{}, false
	}
	return *a, true
}

var (
	infoDesc = prometheus.NewDesc("leasehold_apiserver_info",
		"Always 1, labelled with the kube-apiserver's version as read at start (git_version); absent when it could not be read.",
		[]string{"git_version"}, nil)
	comparableDesc = prometheus.NewDesc("leasehold_apiserver_resource_versions_comparable",
		"1 when the kube-apiserver, as read at start, promises comparable resourceVersions (Kubernetes >= 1.35, KEP-5504), on which the fencing tokens' order rests; 0 when older; absent when its version could not be read.",
		nil, nil)
)

// unreadable is the log line of a version that could not be read or parsed.
const unreadable = "could not read the apiserver's version; carrying on without its checks (fencing tokens assume comparable resourceVersions, Kubernetes >= 1.35)"

// collector exports the Checker's Assessment, once there is one.
type collector struct{ c *Checker }

func (collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- infoDesc
	ch <- comparableDesc
}

func (m collector) Collect(ch chan<- prometheus.Metric) {
	a, ok := m.c.Assessment()
	if !ok {
		return
	}
	ch <- prometheus.MustNewConstMetric(infoDesc, prometheus.GaugeValue, 1, a.GitVersion)
	comparable := 0.0
	if a.ResourceVersionsComparable {
		comparable = 1
	}
	ch <- prometheus.MustNewConstMetric(comparableDesc, prometheus.GaugeValue, comparable)
}
