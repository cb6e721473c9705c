// Command worker writes only while its leasehold sidecar says this pod leads.
//
// It asks the sidecar through leasehold's Go client, pkg/client, which
// imports the standard library and the API's types (pkg/api) only: no
// Kubernetes library. Each call is one of the HTTP requests every other
// example makes by hand. Only the optional fenced ConfigMap (4) uses
// client-go. The pattern (the same in every example):
//
//  1. Block on the sidecar's watch until this pod leads: no busy polling
//     (client.Watch: GET /v1/watch?index=&wait=).
//  2. Before EACH write, ask for the token (client.Token: GET /v1/token):
//     it gives the fencing token and how long leadership is still valid;
//     client.ErrNotLeader means "not leader": stop.
//  3. Attach the fencing token to every write, and let the store refuse a
//     token smaller than one it has seen (HTTP 409): then a newer leader has
//     written, so stop too, and wait for a newer term than the fenced one.
//  4. Optionally (FENCED_CONFIGMAP) also keep a fenced ConfigMap, which the
//     kube-apiserver itself fences with `leasehold fencing-policy`: labelled
//     leasehold.io/fenced-by: <lease>, each write stamped with the annotation
//     leasehold.io/fencing-token: "<token>". A Forbidden from the policy
//     ("leasehold fencing rule ...") means the same as the store's 409.
//
// Environment:
//
//	LEASEHOLD_URL     the sidecar's API (default http://127.0.0.1:4040)
//	STORE_URL         where writes are POSTed (default http://127.0.0.1:8080/write)
//	WORKER_NAME       sent as ?writer= (default: the host name, i.e. the pod name)
//	FENCED_CONFIGMAP  a ConfigMap in the Lease's namespace to server-side apply
//	                  after each write (default: none), as the pod's
//	                  ServiceAccount (or $KUBECONFIG), which needs create and
//	                  patch on configmaps
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/url"
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
	"k8s.io/client-go/tools/clientcmd"

	"github.com/leasehold/leasehold/pkg/api"
	"github.com/leasehold/leasehold/pkg/client"
)

const (
	interval = 50 * time.Millisecond // between writes
	margin   = 2 * interval          // never start a write with less validity left
)

var (
	store     = env("STORE_URL", "http://127.0.0.1:8080/write")
	name      = env("WORKER_NAME", hostname())
	configMap = env("FENCED_CONFIGMAP", "")
)

func main() {
	log.SetPrefix(name + ": ")
	// Requests that do not block (the token check) give up after 2s; the
	// watch blocks for up to 5m per request, and its own bound.
	lh, err := client.New(env("LEASEHOLD_URL", client.DefaultURL), client.WithTimeout(2*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	// SIGTERM/SIGINT cancel ctx, which ends any request in flight, even a
	// blocking watch; the loops then return.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	var kube kubernetes.Interface // nil: no fenced ConfigMap
	if configMap != "" {
		if kube, err = kubeClient(); err != nil {
			log.Fatal(err)
		}
	}

	var fenced api.FencingToken // the largest token the store has refused: never lead with it again
	for ctx.Err() == nil {
		log.Print("waiting for leadership")
		st, err := waitForLeadership(ctx, lh, fenced)
		if err == nil {
			log.Printf("leading with fencing token %d; starting work", st.FencingToken)
			fenced, err = work(ctx, lh, kube, st, fenced)
		}
		if err != nil && ctx.Err() == nil {
			// The store unreachable, or an answer we did not expect.
			log.Printf("error: %v; retrying in 1s", err)
			sleep(ctx, time.Second)
		}
	}
	log.Print("signal received: exiting")
}

// waitForLeadership blocks until this pod leads a term whose token is above
// fenced, and returns the sidecar's status. Watch yields the current state at once,
// then each change of state; between changes it blocks in the sidecar: a
// blocking query, not a poll. While the sidecar does not answer it yields
// the error and asks again by itself.
func waitForLeadership(ctx context.Context, lh *client.Client, fenced api.FencingToken) (api.Status, error) {
	var last error
	for st, err := range lh.Watch(ctx) {
		if last = err; err != nil {
			log.Printf("watch: %v", err)
			continue
		}
		if st.Leader && st.FencingToken > fenced {
			return st, nil
		}
	}
	if last == nil {
		last = ctx.Err()
	}
	return api.Status{}, last // ctx ended, or an answer asking again cannot change
}

// work writes every interval while this pod leads the term of st (and,
// with kube, keeps the fenced ConfigMap). It returns when leadership ends,
// or when ctx ends; after a refusal (the store's 409, or the fencing
// policy's) it returns the rejected token as the new fenced one.
func work(ctx context.Context, lh *client.Client, kube kubernetes.Interface, st api.Status, fenced api.FencingToken) (api.FencingToken, error) {
	for n := 0; ctx.Err() == nil; sleep(ctx, interval) {
		// Rule 1: ask before every write; never cache the answer.
		lease, err := lh.Token(ctx)
		switch {
		case errors.Is(err, client.ErrNotLeader):
			log.Print("leadership lost; stopping work")
			return fenced, nil
		case err != nil:
			return fenced, err
		}
		if time.Duration(lease.ValidForMs)*time.Millisecond < margin {
			// Too close to the end of the term to start a write. The sidecar
			// renews every retry period; check again at the next tick.
			continue
		}

		// Rule 2: the token travels with the write; the store checks it.
		n++
		q := url.Values{"token": {lease.FencingToken.String()}, "writer": {name}}
		code, err := post(ctx, store+"?"+q.Encode(), fmt.Sprintf("write %d\n", n))
		switch {
		case err != nil:
			return fenced, err
		case code == http.StatusConflict:
			log.Printf("store rejected token %d: a newer leader has written; stopping work", lease.FencingToken)
			return lease.FencingToken, nil
		case code/100 != 2:
			return fenced, fmt.Errorf("store answered HTTP %d", code)
		}
		if kube != nil {
			err := fencedWrite(ctx, kube, st, lease.FencingToken, n)
			switch {
			case isFencingRefusal(err):
				log.Printf("apiserver refused token %d: %v; stopping work", lease.FencingToken, err)
				return lease.FencingToken, nil
			case err != nil:
				return fenced, err
			}
		}
	}
	return fenced, nil
}

// kubeClient connects as $KUBECONFIG says, else (in a pod) as the pod's
// ServiceAccount.
func kubeClient() (kubernetes.Interface, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", os.Getenv("KUBECONFIG"))
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(cfg)
}

// fencedWrite server-side applies the ConfigMap configMap, in the Lease's
// namespace, labelled as fenced by the Lease and stamped with token: one
// request that creates or updates it.
func fencedWrite(ctx context.Context, kube kubernetes.Interface, st api.Status, token api.FencingToken, n int) error {
	cm := corev1ac.ConfigMap(configMap, st.Namespace).
		WithLabels(map[string]string{"leasehold.io/fenced-by": st.Lease}).
		WithAnnotations(map[string]string{api.FencingTokenAnnotation: token.String()}).
		WithData(map[string]string{"writer": name, "write": strconv.Itoa(n)})
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err := kube.CoreV1().ConfigMaps(st.Namespace).Apply(ctx, cm, metav1.ApplyOptions{FieldManager: "leasehold-example", Force: true})
	return err
}

// isFencingRefusal tells a refusal by the fencing policy (a newer term's
// token is on the object or the Lease) from any other error.
func isFencingRefusal(err error) bool {
	return apierrors.IsForbidden(err) && strings.Contains(err.Error(), "leasehold fencing")
}

// post writes body to the store, within 2s, and returns the status code.
func post(ctx context.Context, url, body string) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body) // read it all, so the connection is reused
	return resp.StatusCode, nil
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
