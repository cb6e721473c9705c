package podlabel

import (
	"context"
	"log/slog"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/clock"

	"github.com/leasehold/leasehold/internal/elect"
	"github.com/leasehold/leasehold/internal/rule"
)

// Source publishes the election state; *elect.Elector satisfies it.
type Source interface {
	Snapshot() *elect.Snapshot
}

// Config describes the label and the Pod that carries it.
type Config struct {
	// Pods patches and lists the Pods of Namespace: client-go's typed
	// PodInterface, or kubeclient.NewPodClient's lean one.
	Pods PodClient
	// Namespace and PodName locate this sidecar's own Pod (POD_NAMESPACE and
	// POD_NAME from the downward API). Cleanup lists Pods in Namespace.
	Namespace, PodName string
	// Key is the label's key, e.g. "leasehold.io/leader"; its values are
	// "true" and "false". It must not be LeaseKey. In a lease group the
	// key written is GroupLeaderKey(Key, LeaseName).
	Key string
	// LeaseNamespace and LeaseName identify the Lease of the election that
	// Source runs. For a single Lease the Labeler writes them on its own
	// Pod as the election label LeaseKey, and its cleanup touches only Pods
	// that carry the same election label, never another election's.
	LeaseNamespace, LeaseName string
	// Group, when not empty, is the lease group LeaseName belongs to
	// (its Leases live in LeaseNamespace): the Labeler then keeps the
	// label GroupLeaderKey(Key, LeaseName) and writes the election label
	// GroupKey, naming the group, instead of LeaseKey; its cleanup touches
	// only that key on Pods of the same group. A sidecar of a group runs
	// one Labeler per Lease, all with the same Group.
	Group string
	// Source is the election whose Snapshot.Leading the label follows.
	Source Source

	// RetryPeriod is the wait after a failed request (and bounds each
	// request: max(RetryPeriod, 1s)).
	RetryPeriod time.Duration
	// Resync is how often the leader clears other Pods' stale true labels
	// (and checks its own) while it leads, e.g. the lease duration.
	Resync time.Duration

	// Clock is the time source; nil means the real clock. It must be the
	// Elector's clock: Snapshot.IsLeader is judged with it.
	Clock clock.WithTicker
	// Logger receives the Labeler's log lines; nil discards them.
	Logger *slog.Logger
	// Metrics receives the Labeler's metrics; nil means unregistered ones.
	Metrics *Metrics
}

// Validate checks c's settings (not its Pods, Source, Clock, Logger or
// Metrics) and returns the first broken rule as a *rule.Error naming the
// fields it relates, with their values:
//
//   - Key is a qualified label name, and not LeaseKey;
//   - with Group, GroupLeaderKey(Key, LeaseName) is a qualified label
//     name too (checked after LeaseName);
//   - Namespace and PodName locate a Pod: a DNS label and a DNS subdomain;
//   - LeaseNamespace and LeaseName name a Lease: a DNS label and a DNS
//     subdomain;
//   - RetryPeriod and Resync are greater than 0.
func (c *Config) Validate() error {
	var (
		key            = rule.Field{Name: "Key", Value: c.Key}
		namespace      = rule.Field{Name: "Namespace", Label: "the Pod's namespace", Value: c.Namespace}
		podName        = rule.Field{Name: "PodName", Label: "podName", Value: c.PodName}
		leaseNamespace = rule.Field{Name: "LeaseNamespace", Label: "the Lease's namespace", Value: c.LeaseNamespace}
		leaseName      = rule.Field{Name: "LeaseName", Label: "the Lease's name", Value: c.LeaseName}
	)
	if errs := validation.IsQualifiedName(c.Key); len(errs) > 0 {
		return rule.Errorf(component, "%s is not a valid label key: %s", key, strings.Join(errs, "; "))
	}
	if c.Key == LeaseKey {
		return rule.Errorf(component, "%s is the election label that leasehold writes next to the leader label; choose another key, such as leasehold.io/leader", key)
	}
	switch {
	case c.Namespace == "":
		return rule.Errorf(component, "%s is required (set POD_NAMESPACE from the downward API)", namespace)
	case c.PodName == "":
		return rule.Errorf(component, "%s is required (set POD_NAME from the downward API)", podName)
	}
	if errs := validation.IsDNS1123Label(c.Namespace); len(errs) > 0 {
		return rule.Errorf(component, "%s is not a valid DNS label: %s", namespace, strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1123Subdomain(c.PodName); len(errs) > 0 {
		return rule.Errorf(component, "%s is not a valid Pod name: %s", podName, strings.Join(errs, "; "))
	}
	// The Lease's namespace and name make the election label's value.
	if errs := validation.IsDNS1123Label(c.LeaseNamespace); len(errs) > 0 {
		return rule.Errorf(component, "%s is not a valid DNS label: %s", leaseNamespace, strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1123Subdomain(c.LeaseName); len(errs) > 0 {
		return rule.Errorf(component, "%s is not a valid DNS subdomain: %s", leaseName, strings.Join(errs, "; "))
	}
	if c.Group != "" {
		// The Lease is shown as a value, not a field: the rule is about
		// Key, which the user chose for every Lease of the group.
		groupKey := GroupLeaderKey(c.Key, c.LeaseName)
		if errs := validation.IsQualifiedName(groupKey); len(errs) > 0 {
			return rule.Errorf(component, "%s with the Lease %q of the group makes the leader label key %q, which is not a valid label key: %s; shorten the key or the Lease's name", key, c.LeaseName, groupKey, strings.Join(errs, "; "))
		}
	}
	switch {
	case c.RetryPeriod <= 0:
		return rule.Errorf(component, "%s must be greater than 0", rule.Field{Name: "RetryPeriod", Label: "retryPeriod", Value: c.RetryPeriod})
	case c.Resync <= 0:
		return rule.Errorf(component, "%s must be greater than 0", rule.Field{Name: "Resync", Label: "resync", Value: c.Resync})
	}
	return nil
}

// MaxGroupLeases is the most Leases a lease group may have with the leader
// label. Each Lease costs its own goroutine and its own label on the Pod,
// and every change of a Lease's leadership one patch of the whole Pod
// object (which every watcher of the Pod, the kubelet and the
// EndpointSlice controller among them, receives): at start each Labeler
// writes once, and on shutdown each Labeler whose Lease this Pod may lead
// writes false concurrently within 2s. For tens of Leases that is cheap;
// beyond this bound the Pod's updates, not the Leases, would dominate.
const MaxGroupLeases = 64

// component prefixes the messages of Validate.
const component = "podlabel"

// requestTimeout bounds every API request of the loop, so that a
// black-holed apiserver cannot stall it for longer than one period.
func (c *Config) requestTimeout() time.Duration {
	return max(c.RetryPeriod, time.Second)
}

// finalTimeout bounds the last write of false when Run's context ends.
const finalTimeout = 2 * time.Second

// PodClient is what the labeler needs of a client of the Pods of Namespace.
// client-go's typed PodInterface satisfies it; it is declared here so that
// the labeler does not import client-go's typed clients, whose package
// registers every API group in client-go's scheme.
type PodClient interface {
	List(ctx context.Context, opts metav1.ListOptions) (*corev1.PodList, error)
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*corev1.Pod, error)
}
