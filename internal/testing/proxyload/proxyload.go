// Package proxyload is closed-loop load through forwarding proxies, for
// the tests that count what a handover costs an app's clients: each client
// sends one request after another, GETs and POSTs in turn, to the proxy it
// is aimed at when it sends, and every answer (or its absence) is kept.
package proxyload

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Target is where one request goes: a proxy's host:port, the headers to
// set, and Via, the caller's name for that proxy (kept on the Answer).
type Target[V any] struct {
	Addr   string
	Header http.Header
	Via    V
}

// Answer is what one request got.
type Answer[V any] struct {
	Via    V      // the Target's
	Method string // GET or POST
	Code   int    // the status; 0 when there was no answer (Err)
	Body   string // the body of an answer other than 200
	Err    error
	// Sent and Received are when the request left and when its answer (or
	// its error) came back.
	Sent, Received time.Time
}

// Load is clients sending until Stop.
type Load[V any] struct {
	stop    context.CancelFunc
	clients sync.WaitGroup
	close   func()

	mu      sync.Mutex
	answers []Answer[V]
}

// Start starts clients clients, each on a goroutine of its own, until ctx
// ends or Stop: client i sends its requests to aim(i), read afresh before
// each one, to the path /work. The clients share one transport (at most
// 4 idle connections per proxy); a request that got no answer is followed
// by the next only after a millisecond (a proxy that is gone does not make
// a client spin). Answers that arrive after the load was stopped are not
// kept.
func Start[V any](ctx context.Context, clients int, aim func(client int) Target[V]) *Load[V] {
	ctx, stop := context.WithCancel(ctx)
	transport := &http.Transport{MaxIdleConnsPerHost: 4, DisableCompression: true}
	client := &http.Client{Transport: transport, Timeout: 10 * time.Second}
	l := &Load[V]{stop: stop, close: transport.CloseIdleConnections}
	for i := range clients {
		l.clients.Go(func() {
			for k := 0; ctx.Err() == nil; k++ {
				a, ok := send(ctx, client, aim(i), k%2 == 1, fmt.Sprintf("write %d of client %d", k, i))
				if !ok {
					return
				}
				l.mu.Lock()
				l.answers = append(l.answers, a)
				l.mu.Unlock()
				if a.Err != nil {
					time.Sleep(time.Millisecond)
				}
			}
		})
	}
	return l
}

// send sends one request to t (a POST of body when post, else a GET); ok
// is false when ctx ended before its answer.
func send[V any](ctx context.Context, client *http.Client, t Target[V], post bool, body string) (Answer[V], bool) {
	method, reader := http.MethodGet, io.Reader(nil)
	if post {
		method, reader = http.MethodPost, strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://"+t.Addr+"/work", reader)
	if err != nil {
		panic(err) // a fixed path on a host:port the test chose
	}
	for k, vs := range t.Header {
		req.Header[k] = vs
	}
	a := Answer[V]{Via: t.Via, Method: method, Sent: time.Now()}
	res, err := client.Do(req)
	if err == nil {
		b, _ := io.ReadAll(res.Body)
		_ = res.Body.Close()
		if a.Code = res.StatusCode; a.Code != http.StatusOK {
			a.Body = string(b)
		}
	}
	a.Err, a.Received = err, time.Now()
	return a, ctx.Err() == nil
}

// Stop stops the clients, waits for them, and returns every answer kept,
// in the order they came back.
func (l *Load[V]) Stop() []Answer[V] {
	l.stop()
	l.clients.Wait()
	l.close()
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.answers
}
