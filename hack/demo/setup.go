package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/leasehold/leasehold/internal/testing/fleet"
	"github.com/leasehold/leasehold/internal/testing/kubetest"
)

// leaseName is the Lease the three sidecars compete for.
const leaseName = "demo"

// stage is everything the demo runs: a real etcd + kube-apiserver, the
// sidecar binary, and the sidecar processes. Its temporary folder holds
// the binary and every log.
type stage struct {
	dir       string
	cluster   *kubetest.Cluster
	fleet     fleet.Config
	instances []*fleet.Instance
}

// setUp starts the cluster and builds the sidecar at the same time, then
// creates the demo's namespace. On error, whatever started is stopped.
func setUp(ctx context.Context) (_ *stage, err error) {
	dir, err := os.MkdirTemp("", "leasehold-demo-")
	if err != nil {
		return nil, err
	}
	s := &stage{dir: dir}
	defer func() {
		if err != nil {
			err = errors.Join(err, s.tearDown(true))
		}
	}()

	var binary string
	var buildErr, clusterErr error
	var wg sync.WaitGroup
	wg.Go(func() { binary, buildErr = fleet.Build(ctx, dir) })
	wg.Go(func() { s.cluster, clusterErr = kubetest.Start(ctx, kubetest.Options{}) })
	wg.Wait()
	if err := errors.Join(clusterErr, buildErr); err != nil {
		return nil, err
	}
	ns, err := s.cluster.CreateNamespace(ctx, "leasehold-demo")
	if err != nil {
		return nil, fmt.Errorf("create namespace: %w", err)
	}
	s.fleet = fleet.Config{
		Binary: binary, Cluster: s.cluster, Namespace: ns, Lease: leaseName,
		LeaseDuration: leaseDuration, RenewDeadline: renewDeadline, RetryPeriod: retryPeriod,
		Dir: dir,
	}
	return s, nil
}

// startInstances starts one sidecar per name, all at once, so that they
// really compete for the Lease. Each is ready (it has observed or acquired
// the Lease) when this returns.
func (s *stage) startInstances(ctx context.Context, names []string) error {
	instances := make([]*fleet.Instance, len(names))
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Go(func() { instances[i], errs[i] = s.fleet.Start(ctx, name, false) })
	}
	wg.Wait()
	for _, inst := range instances {
		if inst != nil {
			s.instances = append(s.instances, inst)
		}
	}
	return errors.Join(errs...)
}

// tearDown stops every sidecar still running (SIGTERM, as Kubernetes
// would, then SIGKILL after exitBound), then the apiserver and etcd, and
// checks that nothing is left running. It removes the temporary folder
// unless keepLogs.
func (s *stage) tearDown(keepLogs bool) error {
	var wg sync.WaitGroup
	for _, inst := range s.instances {
		wg.Go(func() {
			select {
			case <-inst.Exited():
			default:
				_ = inst.Signal(syscall.SIGTERM)
				select {
				case <-inst.Exited():
				case <-time.After(exitBound):
				}
			}
			inst.Stop() // kills it if it is still there, and waits
		})
	}
	wg.Wait()
	var errs []error
	if s.cluster != nil {
		errs = append(errs, s.cluster.Stop())
		if pids := s.cluster.PIDs(); len(pids) > 0 {
			errs = append(errs, fmt.Errorf("etcd or kube-apiserver still running: pids %v", pids))
		}
	}
	if !keepLogs {
		errs = append(errs, os.RemoveAll(s.dir))
	}
	return errors.Join(errs...)
}
