// Command worker writes only while its leasehold sidecar says this pod leads.
//
// Standard library only: it is an app, not part of leasehold, and talks to
// the sidecar over HTTP like any other language would. The pattern (the
// same in every example):
//
//  1. Block on the sidecar's watch until this pod leads: no busy polling.
//  2. Before EACH write, ask GET /v1/token: 200 gives the fencing token and
//     how long leadership is still valid; 503 means "not leader": stop.
//  3. Attach the fencing token to every write, and let the store refuse a
//     token smaller than one it has seen (HTTP 409): then a newer leader has
//     written, so stop too, and wait for a newer term than the fenced one.
//
// Environment:
//
//	LEASEHOLD_URL  the sidecar's API (default http://127.0.0.1:4040)
//	STORE_URL      where writes are POSTed (default http://127.0.0.1:8080/write)
//	WORKER_NAME    sent as ?writer= (default: the host name, i.e. the pod name)
package main

import (
	"context"
	"encoding/json"
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
)

const (
	interval  = 50 * time.Millisecond // between writes
	margin    = 2 * interval          // never start a write with less validity left
	watchWait = "60s"                 // how long one blocking watch request may block
)

var (
	leasehold = strings.TrimRight(env("LEASEHOLD_URL", "http://127.0.0.1:4040"), "/")
	store     = env("STORE_URL", "http://127.0.0.1:8080/write")
	name      = env("WORKER_NAME", hostname())
)

func main() {
	log.SetPrefix(name + ": ")
	// SIGTERM/SIGINT cancel ctx, which ends any request in flight, even a
	// blocking watch; the loops then return.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	var fenced uint64 // the largest token the store has refused: never lead with it again
	for ctx.Err() == nil {
		log.Print("waiting for leadership")
		token, err := waitForLeadership(ctx, fenced)
		if err == nil {
			log.Printf("leading with fencing token %d; starting work", token)
			fenced, err = work(ctx, fenced)
		}
		if err != nil && ctx.Err() == nil {
			// Sidecar or store unreachable, or an answer we did not expect.
			log.Printf("error: %v; retrying in 1s", err)
			sleep(ctx, time.Second)
		}
	}
	log.Print("signal received: exiting")
}

// status is the part of GET /v1/watch's answer this worker reads.
type status struct {
	Leader       bool   `json:"leader"`
	FencingToken uint64 `json:"fencingToken"`
	Index        uint64 `json:"index"`
}

// waitForLeadership blocks until this pod leads a term whose token is above
// fenced, and returns the token. GET /v1/watch answers at once without index
// (or when the state has moved on), and otherwise blocks until the state
// changes: a blocking query, not a poll. A return does not promise a change.
func waitForLeadership(ctx context.Context, fenced uint64) (uint64, error) {
	query := ""
	for {
		var st status
		code, err := call(ctx, 90*time.Second, http.MethodGet, leasehold+"/v1/watch?wait="+watchWait+query, "", &st)
		if err != nil {
			return 0, err
		}
		if code != http.StatusOK {
			return 0, fmt.Errorf("watch answered HTTP %d", code)
		}
		if st.Leader && st.FencingToken > fenced {
			return st.FencingToken, nil
		}
		query = "&index=" + strconv.FormatUint(st.Index, 10)
	}
}

// work writes every interval while this pod leads. It returns when
// leadership ends, or when ctx ends; after a 409 it returns the rejected
// token as the new fenced one.
func work(ctx context.Context, fenced uint64) (uint64, error) {
	for n := 1; ctx.Err() == nil; sleep(ctx, interval) {
		// Rule 1: ask before every write; never cache the answer.
		var lease struct {
			FencingToken uint64 `json:"fencingToken"`
			ValidForMs   int64  `json:"validForMs"`
		}
		code, err := call(ctx, 2*time.Second, http.MethodGet, leasehold+"/v1/token", "", &lease)
		switch {
		case err != nil:
			return fenced, err
		case code == http.StatusServiceUnavailable:
			log.Print("leadership lost; stopping work")
			return fenced, nil
		case code != http.StatusOK:
			return fenced, fmt.Errorf("token check answered HTTP %d", code)
		}
		if time.Duration(lease.ValidForMs)*time.Millisecond < margin {
			// Too close to the end of the term to start a write. The sidecar
			// renews every retry period; check again at the next tick.
			continue
		}

		// Rule 2: the token travels with the write; the store checks it.
		q := url.Values{"token": {strconv.FormatUint(lease.FencingToken, 10)}, "writer": {name}}
		code, err = call(ctx, 2*time.Second, http.MethodPost, store+"?"+q.Encode(), fmt.Sprintf("write %d\n", n), nil)
		n++
		switch {
		case err != nil:
			return fenced, err
		case code == http.StatusConflict:
			log.Printf("store rejected token %d: a newer leader has written; stopping work", lease.FencingToken)
			return lease.FencingToken, nil
		case code/100 != 2:
			return fenced, fmt.Errorf("store answered HTTP %d", code)
		}
	}
	return fenced, nil
}

// call makes one request bounded by timeout and, when out is not nil and the
// answer is 200, decodes its JSON body into out. It returns the status code.
func call(ctx context.Context, timeout time.Duration, method, url, body string, out any) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body) // read it all, so the connection is reused
	if err == nil && out != nil && resp.StatusCode == http.StatusOK {
		err = json.Unmarshal(data, out)
	}
	return resp.StatusCode, err
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
