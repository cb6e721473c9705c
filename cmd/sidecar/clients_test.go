package main_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/testing/poll"
	"github.com/leasehold/leasehold/pkg/api"
)

// generous bounds real-time waits for an answer that must come; it never
// decides an outcome.
const generous = 20 * time.Second

// eventually polls cond every 20ms until it holds, failing t after generous
// with report's account of the last state cond saw (nil: none).
func eventually(t *testing.T, what string, cond func() bool, report func() string) {
	t.Helper()
	poll.UntilReport(t, generous, 20*time.Millisecond, what, cond, report)
}

// answer is one answer of a blocking request of the API.
type answer struct {
	code       int
	retryAfter string
	status     api.Status // decoded when code is 200
	body       string
	err        error
}

// longPoll sends GET url (a long-poll) in the background; its answer
// arrives on the channel.
func longPoll(ctx context.Context, url string) <-chan answer {
	ch := make(chan answer, 1)
	go func() {
		var a answer
		defer func() { ch <- a }()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			a.err = err
			return
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			a.err = err
			return
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		a.code, a.retryAfter, a.body, a.err = resp.StatusCode, resp.Header.Get("Retry-After"), string(body), err
		if a.err == nil && a.code == http.StatusOK {
			a.err = json.Unmarshal(body, &a.status)
		}
	}()
	return ch
}

// event is one Server-Sent Events frame: a status event, or a comment.
type event struct {
	id      uint64
	status  api.Status
	comment string
}

// stream opens an SSE stream on url, with Last-Event-ID lastID unless "",
// and delivers its frames until it ends (then closes the channel). It
// fails when the answer is not a 200 event stream.
func stream(ctx context.Context, url, lastID string) (<-chan event, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/event-stream")
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		resp.Body.Close()
		return nil, errors.New("not an event stream: " + resp.Status)
	}
	frames := make(chan event, 16)
	go func() {
		defer close(frames)
		defer resp.Body.Close()
		lines := bufio.NewScanner(resp.Body)
		var ev event
		for lines.Scan() {
			line := lines.Text()
			switch {
			case line == "" && ev == (event{}):
				// a frame with only the retry field, which every stream
				// starts with: no event
			case line == "":
				frames <- ev
				ev = event{}
			case strings.HasPrefix(line, "retry: "):
			case strings.HasPrefix(line, ":"):
				ev.comment = strings.TrimSpace(line[1:])
			case strings.HasPrefix(line, "id: "):
				ev.id, _ = strconv.ParseUint(line[len("id: "):], 10, 64)
			case strings.HasPrefix(line, "data: "):
				_ = json.Unmarshal([]byte(line[len("data: "):]), &ev.status)
			}
		}
	}()
	return frames, nil
}

// nextFrame waits (generously) for the next frame; ok is false when the
// stream ended.
func nextFrame(frames <-chan event) (ev event, ok bool, timedOut bool) {
	select {
	case ev, ok := <-frames:
		return ev, ok, false
	case <-time.After(generous):
		return event{}, false, true
	}
}
