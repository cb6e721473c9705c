package fencepolicy

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/leasehold/leasehold/internal/elect"
	"github.com/leasehold/leasehold/internal/elect/decide"
	"github.com/leasehold/leasehold/internal/testing/kubetest"
	"github.com/leasehold/leasehold/internal/testing/poll"
)

// trials is how many times the deposed-leader test deposes a leader.
const trials = 20

// A deposed leader whose writes still reach the apiserver (its elector is
// partitioned; its app, paused before, resumes with the old token) keeps
// writing two fenced ConfigMaps with its old token, as fast as it can:
//
//   - on the one the successor writes, every write sent after the
//     successor's write was answered is refused (rule 2, atomic);
//   - on the one the successor never writes, the writes are refused from
//     a short window after the successor's term began on (rule 3 with
//     the acquiring write's floor, LEASEHOLD_FENCING_FLOOR). The window
//     measured is from the send time of the successor's acquiring write
//     (its acquireTime) to the answer of the deposed leader's last write
//     that landed: an upper bound on the apiserver's cache delay.
//
// Over trials partitions, alternating between two sidecar electors, it
// reports the window's p50 and max.
func TestDeposedLeaderIsRefused(t *testing.T) {
	c := kubetest.Require(t, cluster)
	ns, err := c.CreateNamespace(t.Context(), "fence")
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, ctx: t.Context(), namespace: ns, cs: c.Clientset()}
	policy, binding := Objects(f.options())
	createPolicy(t, f.cs, policy, binding)
	poll.Until(t, generous, 10*time.Millisecond, "the policy enforced (no Lease yet: every write refused)", func() bool {
		_, err := f.configMaps().Create(f.ctx, f.configMap("early", "1"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err != nil && strings.Contains(err.Error(), "no params found")
	})

	a, b := f.startElector(c, "a"), f.startElector(c, "b")
	var windows []time.Duration
	for i := range trials {
		leader, successor := a, b
		poll.Until(t, generous, 5*time.Millisecond, "a leader", func() bool { return a.leads() || b.leads() })
		if b.leads() {
			leader, successor = b, a
		}
		windows = append(windows, f.depose(i, leader, successor))
	}
	sorted := slices.Sorted(slices.Values(windows))
	t.Logf("rule 3 window over %d trials (successor's acquire sent → deposed leader's last landed write answered): p50 %v, max %v; all: %v",
		len(sorted), sorted[len(sorted)/2].Round(time.Microsecond), sorted[len(sorted)-1].Round(time.Microsecond), windows)
}

// electorTimings are short, within every rule.
const (
	testLeaseDuration = 2 * time.Second
	testRenewDeadline = time.Second
	testRetryPeriod   = 250 * time.Millisecond
)

// elector is one sidecar election, reaching the apiserver through its own
// proxy (so it can be partitioned), with the token floor on.
type elector struct {
	*elect.Elector
	proxy *kubetest.Proxy
}

func (e *elector) leads() bool { return e.Snapshot().IsLeader(time.Now()) }

func (f *fixture) startElector(c *kubetest.Cluster, identity string) *elector {
	f.t.Helper()
	proxy, err := c.NewProxy()
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { _ = proxy.Close() })
	u, err := c.Admin().Through(proxy)
	if err != nil {
		f.t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(u.Config)
	if err != nil {
		f.t.Fatal(err)
	}
	e, err := elect.New(elect.Config{
		Config: decide.Config{
			Namespace: f.namespace, Name: leaseName, Identity: identity,
			LeaseDuration: testLeaseDuration, RenewDeadline: testRenewDeadline, RetryPeriod: testRetryPeriod,
			ReleaseOnStop: true, FencingFloor: true,
		},
		Leases: cs.CoordinationV1().Leases(f.namespace),
	})
	if err != nil {
		f.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	f.t.Cleanup(func() {
		proxy.Heal()
		cancel()
		if err := <-done; err != nil {
			f.t.Errorf("%s: Run: %v", identity, err)
		}
	})
	return &elector{Elector: e, proxy: proxy}
}

// staleWrite is one write of the deposed leader.
type staleWrite struct {
	object       string
	sent, answer time.Time
	err          error
}

// depose runs trial i: leader writes both objects, is partitioned and
// keeps writing them with its token while successor takes over and writes
// one of them. It checks what must be refused and returns the window.
func (f *fixture) depose(i int, leader, successor *elector) time.Duration {
	f.t.Helper()
	old := leader.Snapshot().Token
	shared, untouched := fmt.Sprintf("primary-%d", i), fmt.Sprintf("untouched-%d", i)
	f.create(shared, old.String())
	f.create(untouched, old.String())

	ctx, stop := context.WithCancel(f.ctx)
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		writes []staleWrite
	)
	for _, name := range []string{shared, untouched} {
		wg.Go(func() {
			for n := 0; ctx.Err() == nil; n++ {
				cm := f.configMap(name, old.String())
				cm.Data["written"] = fmt.Sprint(n)
				w := staleWrite{object: name, sent: time.Now()}
				_, w.err = f.configMaps().Update(ctx, cm, metav1.UpdateOptions{}) // unconditional: no conflict to stop it
				w.answer = time.Now()
				if errors.Is(w.err, context.Canceled) || ctx.Err() != nil {
					return
				}
				mu.Lock()
				writes = append(writes, w)
				mu.Unlock()
			}
		})
	}

	leader.proxy.Cut()
	poll.Until(f.t, generous, time.Millisecond, "the successor leads", successor.leads)
	term := successor.Snapshot()
	if term.Token <= old {
		f.t.Fatalf("trial %d: the successor's token %d is not above the deposed leader's %d", i, term.Token, old)
	}
	cm := f.configMap(shared, term.Token.String())
	cm.Data["primary"] = term.Identity
	if _, err := f.configMaps().Update(f.ctx, cm, metav1.UpdateOptions{}); err != nil {
		f.t.Fatalf("trial %d: the successor's write: %v", i, err)
	}
	successorWrote := time.Now()
	// Keep writing until the deposed leader's writes to both objects have
	// been refused for a while, then heal: it learns of its successor.
	poll.Until(f.t, generous, 10*time.Millisecond, "the deposed leader's writes refused on both objects for 100ms", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, name := range []string{shared, untouched} {
			from := lastLanded(writes, name)
			if from.Before(successorWrote) {
				from = successorWrote
			}
			if !time.Now().After(from.Add(100 * time.Millisecond)) {
				return false
			}
		}
		return true
	})
	stop()
	wg.Wait()
	leader.proxy.Heal()
	poll.Until(f.t, generous, 5*time.Millisecond, "the deposed leader sees its successor", func() bool {
		return leader.Snapshot().Holder == term.Identity
	})

	for _, w := range writes {
		switch {
		case w.err == nil:
		case !strings.Contains(w.err.Error(), "leasehold fencing rule"):
			f.t.Errorf("trial %d: a write of %s failed for another reason: %v", i, w.object, w.err)
		}
		if w.object == shared && w.err == nil && w.sent.After(successorWrote) {
			f.t.Errorf("trial %d: a deposed write to %s sent %v after the successor's write was answered landed", i, shared, w.sent.Sub(successorWrote))
		}
	}
	last := lastLanded(writes, untouched)
	if n := countRefused(writes, untouched); n == 0 {
		f.t.Fatalf("trial %d: no write of the deposed leader to %s was refused", i, untouched)
	}
	return last.Sub(term.AcquiredAt)
}

// lastLanded is the answer time of the last write to name that landed.
func lastLanded(writes []staleWrite, name string) time.Time {
	var last time.Time
	for _, w := range writes {
		if w.object == name && w.err == nil && w.answer.After(last) {
			last = w.answer
		}
	}
	return last
}

func countRefused(writes []staleWrite, name string) int {
	n := 0
	for _, w := range writes {
		if w.object == name && w.err != nil {
			n++
		}
	}
	return n
}
