// Command control-plane is a leader-elected control plane that keeps "the
// current primary" in a ConfigMap, fenced by the kube-apiserver itself.
//
// Each replica runs next to a leasehold sidecar. The one that leads records
// its choice of primary (itself, the replica's name) in the ConfigMap
// CONFIGMAP, and re-asserts it every RESYNC while it leads, as a
// controller's resync does. The ConfigMap is a fenced object: it carries
// the label leasehold.io/fenced-by: <Lease>, every write stamps the term's
// fencing token in the annotation leasehold.io/fencing-token, and the
// admission policy of `leasehold fencing-policy` (installed once by a
// cluster admin) refuses a write whose token is older than the stored
// object's or the Lease's current term.
//
// So the app needs no read-compare-write of its own: no term number kept
// in the ConfigMap and compared before each write, no resourceVersion
// precondition to close the gap between the check and the write. Each
// write is one blind server-side apply. A leader paused between its "am I
// leader?" check and its write (a GC pause, a lost connection) whose
// successor has written meanwhile sends its write with the old token when
// it resumes, and the apiserver refuses it (403, "leasehold fencing rule
// …"): the replica then stops, and waits for a term newer than the refused
// token.
//
// Environment:
//
//	LEASEHOLD_URL         the sidecar's API (default http://127.0.0.1:4040)
//	POD_NAMESPACE         the namespace of the Lease and the ConfigMap (required)
//	LEASEHOLD_LEASE_NAME  the sidecar's Lease: the label's value (required)
//	CONFIGMAP             the fenced ConfigMap (default current-primary)
//	WORKER_NAME           the name recorded as primary (default: the host name, i.e. the pod name)
//	RESYNC                how often the leader re-asserts its choice (default 5s)
//	KUBECONFIG            a kubeconfig; unset, the pod's service account (in-cluster)
//	PAUSE_BEFORE_WRITE    for tests only: N stops this process (SIGSTOP) after the
//	                      check of its Nth write and before the write, as a GC pause would
//
// It needs create and patch on configmaps in its namespace (the first
// server-side apply creates the ConfigMap, and needs create for that).
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/kubernetes"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/leasehold/leasehold/pkg/api"
	"github.com/leasehold/leasehold/pkg/client"
)

// The fencing contract's names (leasehold fencing-policy; docs/using.md).
const (
	fencedByLabel   = "leasehold.io/fenced-by"
	tokenAnnotation = api.FencingTokenAnnotation // leasehold.io/fencing-token
	// fencingRefusal starts the message of every refusal by the policy.
	fencingRefusal = "leasehold fencing "
)

// fieldManager owns the fields every replica applies: one name for all of
// them, so that a new leader's apply takes the ConfigMap over without a
// conflict.
const fieldManager = "control-plane"

// margin is the validity a write needs left to be started: a write that
// could outlive the term is skipped (the policy would refuse a stale one
// all the same).
const margin = 500 * time.Millisecond

type config struct {
	namespace, lease, configMap, name string
	resync                            time.Duration
	pauseBeforeWrite                  int // 0: never
}

func main() {
	cfg, err := readConfig()
	if err != nil {
		log.Fatal(err)
	}
	log.SetPrefix(cfg.name + ": ")
	lh, err := client.New(env("LEASEHOLD_URL", client.DefaultURL), client.WithTimeout(2*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	rest, err := clientcmd.BuildConfigFromFlags("", os.Getenv("KUBECONFIG")) // in-cluster when unset
	if err != nil {
		log.Fatal(err)
	}
	kube, err := kubernetes.NewForConfig(rest)
	if err != nil {
		log.Fatal(err)
	}
	p := &primary{cfg: cfg, lh: lh, configMaps: kube.CoreV1().ConfigMaps(cfg.namespace)}
	// SIGTERM/SIGINT cancel ctx, which ends any request in flight, even a
	// blocking watch; the loops then return.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	var fenced api.FencingToken // the largest token the apiserver refused: never lead with it again
	for ctx.Err() == nil {
		log.Print("waiting for leadership")
		token, err := waitForLeadership(ctx, lh, fenced)
		if err == nil {
			log.Printf("leading with fencing token %d", token)
			fenced, err = p.lead(ctx, fenced)
		}
		if err != nil && ctx.Err() == nil {
			log.Printf("error: %v; retrying in 1s", err)
			sleep(ctx, time.Second)
		}
	}
	log.Print("signal received: exiting")
}

func readConfig() (config, error) {
	cfg := config{
		namespace: os.Getenv("POD_NAMESPACE"),
		lease:     os.Getenv("LEASEHOLD_LEASE_NAME"),
		configMap: env("CONFIGMAP", "current-primary"),
		name:      env("WORKER_NAME", hostname()),
	}
	if cfg.namespace == "" || cfg.lease == "" {
		return cfg, errors.New("POD_NAMESPACE and LEASEHOLD_LEASE_NAME must be set: the Lease's namespace and name, as the sidecar's")
	}
	var err error
	if cfg.resync, err = time.ParseDuration(env("RESYNC", "5s")); err != nil || cfg.resync <= 0 {
		return cfg, fmt.Errorf("RESYNC=%q: want a positive duration such as 5s", os.Getenv("RESYNC"))
	}
	if v := os.Getenv("PAUSE_BEFORE_WRITE"); v != "" {
		if cfg.pauseBeforeWrite, err = strconv.Atoi(v); err != nil || cfg.pauseBeforeWrite < 1 {
			return cfg, fmt.Errorf("PAUSE_BEFORE_WRITE=%q: want a write's number, from 1", v)
		}
	}
	return cfg, nil
}

// waitForLeadership blocks on the sidecar's watch until this pod leads a
// term whose token is above fenced, and returns the token.
func waitForLeadership(ctx context.Context, lh *client.Client, fenced api.FencingToken) (api.FencingToken, error) {
	var last error
	for st, err := range lh.Watch(ctx) {
		if last = err; err != nil {
			log.Printf("watch: %v", err)
			continue
		}
		if st.Leader && st.FencingToken > fenced {
			return st.FencingToken, nil
		}
	}
	if last == nil {
		last = ctx.Err()
	}
	return 0, last
}

// primary records the current primary while this replica leads.
type primary struct {
	cfg        config
	lh         *client.Client
	configMaps corev1client.ConfigMapInterface
	writes     int // writes started, for PAUSE_BEFORE_WRITE
}

// lead records this replica as the primary, then again every resync, while
// the sidecar says it leads. It returns when leadership ends (fenced
// unchanged), when the apiserver refuses a write as fenced (the refused
// token, the new fenced one), or when ctx ends.
func (p *primary) lead(ctx context.Context, fenced api.FencingToken) (api.FencingToken, error) {
	for ; ctx.Err() == nil; sleep(ctx, p.cfg.resync) {
		// Am I the leader, with which token? Ask before every write.
		term, err := p.lh.Token(ctx)
		switch {
		case errors.Is(err, client.ErrNotLeader):
			log.Print("leadership lost; stopping")
			return fenced, nil
		case err != nil:
			return fenced, err
		case time.Duration(term.ValidForMs)*time.Millisecond < margin:
			continue // too close to the end of the term; the sidecar renews meanwhile
		}
		p.writes++
		if p.writes == p.cfg.pauseBeforeWrite {
			log.Printf("pausing before write %d, with token %d (PAUSE_BEFORE_WRITE)", p.writes, term.FencingToken)
			pause() // returns once SIGCONT resumes the process
		}
		// The write: blind (no resourceVersion), stamped with the token.
		// However long ago the check above was, the apiserver compares
		// the token with the stored object's and the Lease's, atomically.
		rv, err := p.record(ctx, term)
		switch {
		case isFenced(err):
			log.Printf("refused: the apiserver refused the write with token %d: %v; no longer the leader: stopping", term.FencingToken, err)
			return term.FencingToken, nil
		case err != nil:
			return fenced, err
		}
		log.Printf("recorded primary=%s in %s with token %d (term %d): resourceVersion %s", p.cfg.name, p.cfg.configMap, term.FencingToken, term.Term, rv)
	}
	return fenced, nil
}

// record applies the ConfigMap naming this replica the primary, as a
// fenced object written with term's token, and returns the resourceVersion
// written.
func (p *primary) record(ctx context.Context, term api.Token) (string, error) {
	cm := corev1ac.ConfigMap(p.cfg.configMap, p.cfg.namespace).
		WithLabels(map[string]string{fencedByLabel: p.cfg.lease}).
		WithAnnotations(map[string]string{tokenAnnotation: term.FencingToken.String()}).
		WithData(map[string]string{"primary": p.cfg.name, "term": strconv.Itoa(int(term.Term))})
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	written, err := p.configMaps.Apply(ctx, cm, metav1.ApplyOptions{FieldManager: fieldManager, Force: true})
	if err != nil {
		return "", err
	}
	return written.ResourceVersion, nil
}

// isFenced reports whether err is the fencing policy's refusal: the writer
// is no longer the leader, and must not retry.
func isFenced(err error) bool {
	return apierrors.IsForbidden(err) && strings.Contains(err.Error(), fencingRefusal)
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

func env(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

func hostname() string {
	h, _ := os.Hostname()
	return h
}
