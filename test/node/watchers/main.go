// Command watchers holds N long-poll watches open on a leasehold API
// (GET /v1/watch?index=I&wait=5m, each renewed when it answers) until
// SIGTERM: test/node runs it beside leasehold, in the same pod, to measure
// the sidecar's memory with that many watchers. Built into the node's
// tools image (hack/node/images.sh).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os/signal"
	"sync"
	"syscall"
	"time"
)

func main() {
	n := flag.Int("n", 1000, "watches to hold open")
	api := flag.String("api", "http://127.0.0.1:4040", "the leasehold API")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: *n, MaxConnsPerHost: 0}}
	var wg sync.WaitGroup
	for range *n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			watch(ctx, client, *api)
		}()
	}
	fmt.Printf("watchers: %d watches on %s\n", *n, *api)
	wg.Wait()
}

// watch keeps one watch open until ctx ends.
func watch(ctx context.Context, client *http.Client, api string) {
	var index uint64
	for ctx.Err() == nil {
		url := fmt.Sprintf("%s/v1/watch?index=%d&wait=5m", api, index)
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return
		}
		resp, err := client.Do(req)
		if err != nil {
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
			continue
		}
		var st struct {
			Index uint64 `json:"index"`
		}
		_ = json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&st)
		resp.Body.Close()
		index = st.Index
	}
}
