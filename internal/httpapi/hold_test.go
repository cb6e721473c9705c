package httpapi

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// holdRequest is an open POST /v1/hold: the answer's code and headers, the
// first JSON value of its body, and the rest of the body as it arrives.
type holdRequest struct {
	code   int
	header http.Header
	body   map[string]any
	cancel context.CancelFunc
	ended  chan error // the rest of the body's end: nil at EOF, else the error
	rest   []byte     // what followed the first JSON value; read after ended
}

// openHold sends POST url, reads the headers and the first JSON value, and
// keeps reading the body in the background until it ends or the test
// cancels the request (closing the connection).
func openHold(t *testing.T, url string) *holdRequest {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	h := &holdRequest{code: resp.StatusCode, header: resp.Header, cancel: cancel, ended: make(chan error, 1)}
	// The body is one line of JSON, then nothing until the hold ends.
	br := bufio.NewReader(resp.Body)
	line, err := br.ReadBytes('\n')
	if err != nil {
		resp.Body.Close()
		t.Fatalf("the answer's first line: %v", err)
	}
	if err := json.Unmarshal(line, &h.body); err != nil {
		resp.Body.Close()
		t.Fatalf("the answer's first line %q: %v", line, err)
	}
	go func() {
		defer resp.Body.Close()
		rest, err := io.ReadAll(br)
		h.rest = rest
		h.ended <- err
	}()
	return h
}

// awaitEnd waits (generously) for the hold's body to end and returns how.
func (h *holdRequest) awaitEnd(t *testing.T) error {
	t.Helper()
	select {
	case err := <-h.ended:
		return err
	case <-time.After(generous):
		t.Fatal("the hold's answer did not end")
		return nil
	}
}

// A hold on the term this instance leads is answered 200 at once, with
// {"held": true, ...status} and the latest index, and then stays open: a
// step-down alone does not end it (the release waits for it). It ends, in
// the election and in leasehold_holds, when the client closes the
// connection.
func TestHoldLastsUntilTheClientLeaves(t *testing.T) {
	f := newFixture(t, leading())
	url := live(t, f.srv.APIHandler())
	f.clock.SetTime(t0.Add(4 * time.Second))

	h := openHold(t, url+"/v1/hold?token=1042")
	if h.code != http.StatusOK || h.header.Get("Content-Type") != "application/json" || h.header.Get(indexHeader) != idxs(0) {
		t.Fatalf("hold: %d, Content-Type %q, %s %q; want 200, application/json, %s", h.code,
			h.header.Get("Content-Type"), indexHeader, h.header.Get(indexHeader), idxs(0))
	}
	if h.body["held"] != true || h.body["leader"] != true || num(t, h.body, "fencingToken") != 1042 ||
		num(t, h.body, "validForMs") != 6000 || h.body["identity"] != identity {
		t.Errorf("hold body %v, want held, leading with token 1042, 6000 ms left", h.body)
	}
	f.waitHolds(1042, 1)
	if g := f.gauges()["leasehold_holds"][""]; g != 1 {
		t.Errorf("leasehold_holds = %v, want 1", g)
	}

	// The term ends (a release has begun): the hold stays.
	f.el.setDraining(true)
	stepped := leading()
	stepped.Leading, stepped.ValidUntil = false, time.Time{}
	f.publish(stepped)
	if rec := do(f.srv.APIHandler(), http.MethodGet, "/v1/status"); rec.Code != http.StatusOK {
		t.Fatalf("status: %d", rec.Code)
	}
	select {
	case err := <-h.ended:
		t.Fatalf("the hold ended (%v) when the term ended; it must last until the client leaves", err)
	default:
	}
	if n := f.el.openHolds(1042); n != 1 {
		t.Fatalf("open holds %d after the step-down, want 1", n)
	}

	h.cancel() // the client goes away: its connection closes
	if err := h.awaitEnd(t); !errors.Is(err, context.Canceled) {
		t.Errorf("client's read ended with %v, want context.Canceled", err)
	}
	f.waitHolds(1042, 0)
	if g := f.gauges()["leasehold_holds"][""]; g != 0 {
		t.Errorf("leasehold_holds = %v after the hold ended, want 0", g)
	}
}

// A hold is refused with 409 when this instance does not lead with the
// token (not leading, an older or a newer token) or the term is being
// released, and with 400 for a missing or malformed token, which never
// reaches the election. It is POST only, and only on the API listener.
func TestHoldRefused(t *testing.T) {
	sp := loadSpec(t)
	f := newFixture(t, candidate())
	api := f.srv.APIHandler()
	check := func(target string, status int, code errorCode) {
		t.Helper()
		rec := do(api, http.MethodPost, target)
		sp.checkResponse(t, recorded(http.MethodPost, "/v1/hold", rec)) // before wantError reads the body
		wantError(t, rec, status, code)
		if rec.Header().Get(indexHeader) == "" {
			t.Errorf("%s: no %s", target, indexHeader)
		}
	}
	check("/v1/hold?token=880", http.StatusConflict, codeConflict) // the holder's token, not ours
	f.publish(leading())
	for _, tok := range []string{"1041", "1043", "880"} {
		check("/v1/hold?token="+tok, http.StatusConflict, codeConflict)
	}
	f.el.setDraining(true)
	check("/v1/hold?token=1042", http.StatusConflict, codeConflict)
	f.el.setDraining(false)

	for _, q := range []string{"", "?token=", "?token=0", "?token=-1", "?token=x", "?token=1.5", "?token=18446744073709551616", "?token=%zz", "?tok=1042"} {
		check("/v1/hold"+q, http.StatusBadRequest, codeBadParameter)
	}
	if n := f.el.openHolds(1042); n != 0 {
		t.Errorf("refused requests took %d holds", n)
	}

	rec := do(api, http.MethodGet, "/v1/hold?token=1042")
	sp.checkResponse(t, recorded(http.MethodPost, "/v1/hold", rec))
	wantError(t, rec, http.StatusMethodNotAllowed, codeMethodNotAllowed)
	if got := rec.Header().Get("Allow"); got != "POST" {
		t.Errorf("Allow = %q, want POST", got)
	}
	wantError(t, do(f.srv.OpsHandler(), http.MethodPost, "/v1/hold?token=1042"), http.StatusNotFound, codeNotFound)
}

// The answer granting a hold matches api/openapi.yaml (recorded from a
// client that leaves at once: the handler answers, then ends the hold).
func TestHoldAnswerMatchesOpenAPI(t *testing.T) {
	sp := loadSpec(t)
	f := newFixture(t, leading())
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/v1/hold?token=1042", nil)
	rec := httptest.NewRecorder()
	f.srv.APIHandler().ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Fatalf("code %d: %s", rec.Code, rec.Body)
	}
	sp.checkResponse(t, recorded(http.MethodPost, "/v1/hold", rec))
	if got := decode(t, rec); got["held"] != true {
		t.Errorf("body %v, want held: true", got)
	}
	f.waitHolds(1042, 0)
}

// EndBlockingRequests (the election has stopped) ends open holds: the
// answer ends after its body, the election's hold ends, and
// http.Server.Shutdown is not held up. Later holds get the shutdown's 503.
func TestHoldEndsWhenBlockingRequestsEnd(t *testing.T) {
	sp := loadSpec(t)
	f := newFixture(t, leading())
	srv := NewHTTPServer(f.srv.APIHandler())
	ln := listen(t)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	url := "http://" + ln.Addr().String()

	h := openHold(t, url+"/v1/hold?token=1042")
	if h.code != http.StatusOK {
		t.Fatalf("hold: %d %v", h.code, h.body)
	}
	f.waitHolds(1042, 1)

	f.srv.EndBlockingRequests()
	if err := h.awaitEnd(t); err != nil || len(h.rest) != 0 {
		t.Errorf("the hold's answer ended with %v after %q; want EOF right after the body", err, h.rest)
	}
	f.waitHolds(1042, 0)
	ctx, cancel := context.WithTimeout(t.Context(), generous)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if err := <-served; err != http.ErrServerClosed {
		t.Errorf("Serve: %v", err)
	}

	o := recorded(http.MethodPost, "/v1/hold", do(f.srv.APIHandler(), http.MethodPost, "/v1/hold?token=1042"))
	wantShuttingDown(t, o)
	sp.checkResponse(t, o)
	if n := f.el.openHolds(1042); n != 0 {
		t.Errorf("a hold was taken after EndBlockingRequests")
	}
}
