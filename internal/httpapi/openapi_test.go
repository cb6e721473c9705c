package httpapi

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/mux"
	"k8s.io/kube-openapi/pkg/validation/spec"
	"k8s.io/kube-openapi/pkg/validation/strfmt"
	"k8s.io/kube-openapi/pkg/validation/validate"
	"sigs.k8s.io/yaml"

	"github.com/leasehold/leasehold/internal/elect"
)

// openAPIPath is the OpenAPI document, relative to this package.
const openAPIPath = "../../api/openapi.yaml"

type oaDoc struct {
	OpenAPI    string                                `json:"openapi"`
	Servers    []oaServer                            `json:"servers"`
	Paths      map[string]map[string]json.RawMessage `json:"paths"`
	Components struct {
		Responses map[string]oaResponse `json:"responses"`
	} `json:"components"`
}

type oaServer struct {
	URL      string `json:"url"`
	Listener string `json:"x-leasehold-listener"`
}

type oaOperation struct {
	Servers    []oaServer            `json:"servers"`
	Parameters []struct{ In string } `json:"parameters"`
	Responses  map[string]oaResponse `json:"responses"`
}

type oaResponse struct {
	Ref     string                     `json:"$ref"`
	Headers map[string]json.RawMessage `json:"headers"`
}

var httpMethods = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}

// documented lists "<listener> <METHOD> <path>" for every operation of doc,
// and checks each operation's responses.
func documented(t *testing.T, doc *oaDoc) []string {
	t.Helper()
	var ops []string
	for path, item := range doc.Paths {
		servers := doc.Servers
		if raw, ok := item["servers"]; ok {
			servers = nil // not into doc.Servers' array
			if err := json.Unmarshal(raw, &servers); err != nil {
				t.Fatalf("%s servers: %v", path, err)
			}
		}
		for key, raw := range item {
			if !slices.Contains(httpMethods, key) {
				continue
			}
			var op oaOperation
			if err := json.Unmarshal(raw, &op); err != nil {
				t.Fatalf("%s %s: %v", key, path, err)
			}
			name := strings.ToUpper(key) + " " + path
			checkResponses(t, doc, name, &op)
			opServers := servers
			if op.Servers != nil {
				opServers = op.Servers
			}
			for _, s := range opServers {
				if s.Listener != "api" && s.Listener != "ops" {
					t.Errorf("%s: server %q has x-leasehold-listener %q, want api or ops", name, s.URL, s.Listener)
				}
				ops = append(ops, s.Listener+" "+name)
			}
		}
	}
	slices.Sort(ops)
	return ops
}

// checkResponses requires X-Leasehold-Index on every response, a 405 with
// Allow on every operation (every route answers 405 to other methods), and
// a 400 on every operation with query parameters.
func checkResponses(t *testing.T, doc *oaDoc, name string, op *oaOperation) {
	t.Helper()
	for code, resp := range op.Responses {
		if resp.Ref != "" {
			ref, ok := strings.CutPrefix(resp.Ref, "#/components/responses/")
			if !ok {
				t.Errorf("%s %s: unexpected $ref %q", name, code, resp.Ref)
				continue
			}
			if resp, ok = doc.Components.Responses[ref]; !ok {
				t.Errorf("%s %s: $ref %q resolves to nothing", name, code, resp.Ref)
				continue
			}
		}
		if _, ok := resp.Headers[indexHeader]; !ok {
			t.Errorf("%s %s: response lacks the %s header", name, code, indexHeader)
		}
		if _, ok := resp.Headers["Allow"]; code == "405" && !ok {
			t.Errorf("%s 405: response lacks the Allow header", name)
		}
	}
	if _, ok := op.Responses["405"]; !ok {
		t.Errorf("%s: no 405 response", name)
	}
	hasQuery := slices.ContainsFunc(op.Parameters, func(p struct{ In string }) bool { return p.In == "query" })
	if _, ok := op.Responses["400"]; hasQuery && !ok {
		t.Errorf("%s: has query parameters but no 400 response", name)
	}
}

// routed lists "<listener> <METHOD> <path>" for every route of r.
func routed(t *testing.T, listener string, r *mux.Router) []string {
	t.Helper()
	var ops []string
	err := r.Walk(func(route *mux.Route, _ *mux.Router, _ []*mux.Route) error {
		path, err := route.GetPathTemplate()
		if err != nil {
			return err
		}
		methods, err := route.GetMethods()
		if err != nil {
			return err
		}
		for _, m := range methods {
			ops = append(ops, listener+" "+m+" "+path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return ops
}

// The OpenAPI document and the routers agree: every route is documented on
// its listener, and every documented operation is routed there.
func TestOpenAPIMatchesRouters(t *testing.T) {
	raw, err := os.ReadFile(openAPIPath)
	if err != nil {
		t.Fatal(err)
	}
	var doc oaDoc
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("%s: %v", openAPIPath, err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.0.") {
		t.Errorf("openapi = %q, want 3.0.x", doc.OpenAPI)
	}

	f := newFixture(t, candidate())
	want := append(routed(t, "api", f.srv.api), routed(t, "ops", f.srv.ops)...)
	slices.Sort(want)
	got := documented(t, &doc)
	for _, op := range want {
		if !slices.Contains(got, op) {
			t.Errorf("routed but not in %s: %s", openAPIPath, op)
		}
	}
	for _, op := range got {
		if !slices.Contains(want, op) {
			t.Errorf("in %s but not routed: %s", openAPIPath, op)
		}
	}
	if len(want) == 0 {
		t.Fatal("no routes")
	}
}

// apiSpec is the OpenAPI document as plain JSON values, every $ref
// resolved, for checking real responses against it.
type apiSpec struct {
	paths, components map[string]any
}

// loadSpec reads and resolves the OpenAPI document.
func loadSpec(t *testing.T) *apiSpec {
	t.Helper()
	raw, err := os.ReadFile(openAPIPath)
	if err != nil {
		t.Fatal(err)
	}
	js, err := yaml.YAMLToJSON(raw)
	if err != nil {
		t.Fatalf("%s: %v", openAPIPath, err)
	}
	var doc map[string]any
	if err := json.Unmarshal(js, &doc); err != nil {
		t.Fatalf("%s: %v", openAPIPath, err)
	}
	resolved, ok := resolveRefs(t, doc, doc, 0).(map[string]any)
	if !ok {
		t.Fatalf("%s: not an object", openAPIPath)
	}
	paths, _ := resolved["paths"].(map[string]any)
	components, _ := resolved["components"].(map[string]any)
	return &apiSpec{paths: paths, components: components}
}

// resolveRefs returns node with every {"$ref": "#/..."} replaced by what it
// points at in doc (the document has no cycles; depth guards against one).
func resolveRefs(t *testing.T, doc, node any, depth int) any {
	t.Helper()
	if depth > 32 {
		t.Fatalf("%s: $ref nesting too deep (a cycle?)", openAPIPath)
	}
	switch n := node.(type) {
	case map[string]any:
		if ref, ok := n["$ref"].(string); ok {
			target := doc
			for _, part := range strings.Split(strings.TrimPrefix(ref, "#/"), "/") {
				m, _ := target.(map[string]any)
				if target = m[part]; target == nil {
					t.Fatalf("%s: $ref %q resolves to nothing", openAPIPath, ref)
				}
			}
			return resolveRefs(t, doc, target, depth+1)
		}
		out := make(map[string]any, len(n))
		for k, v := range n {
			out[k] = resolveRefs(t, doc, v, depth+1)
		}
		return out
	case []any:
		out := make([]any, len(n))
		for i, v := range n {
			out[i] = resolveRefs(t, doc, v, depth+1)
		}
		return out
	default:
		return node
	}
}

// observed is one real response of the Server.
type observed struct {
	method, path string // path is a path of the document, e.g. /v1/watch
	code         int
	header       http.Header
	body         []byte
}

// recorded is the response rec recorded for method and path (rec's body is
// left unread).
func recorded(method, path string, rec *httptest.ResponseRecorder) observed {
	return observed{method: method, path: path, code: rec.Code, header: rec.Header(), body: bytes.Clone(rec.Body.Bytes())}
}

// checkResponse fails t for every way in which a real response departs
// from the document (see problems).
func (sp *apiSpec) checkResponse(t *testing.T, o observed) {
	t.Helper()
	for _, p := range sp.problems(o) {
		t.Errorf("%s %s → %d: %s", o.method, o.path, o.code, p)
	}
}

// problems lists how a real response departs from the document: the
// operation must document its status code; every header it documents as
// required must be there; every X-Leasehold-Index, Retry-After or Allow
// sent must be documented and match its schema; the Content-Type must be
// documented, and a JSON body must match the documented schema.
func (sp *apiSpec) problems(o observed) []string {
	var out []string
	item, _ := sp.paths[o.path].(map[string]any)
	op, _ := item[strings.ToLower(o.method)].(map[string]any)
	if op == nil {
		return []string{"operation not documented"}
	}
	responses, _ := op["responses"].(map[string]any)
	resp, _ := responses[strconv.Itoa(o.code)].(map[string]any)
	if resp == nil {
		return []string{fmt.Sprintf("status code not documented (body %s)", o.body)}
	}
	headers, _ := resp["headers"].(map[string]any)
	for h, def := range headers {
		def, _ := def.(map[string]any)
		value := o.header.Get(h)
		if value == "" {
			if def["required"] == true {
				out = append(out, "required header "+h+" missing")
			}
			continue
		}
		var v any = value
		if schema, _ := def["schema"].(map[string]any); schema["type"] == "integer" {
			n, err := strconv.ParseInt(value, 10, 64)
			if err != nil {
				out = append(out, fmt.Sprintf("header %s = %q, want an integer", h, value))
				continue
			}
			v = n
		}
		out = append(out, mismatches("header "+h, def["schema"], v)...)
	}
	for _, h := range []string{indexHeader, "Retry-After", "Allow"} {
		if _, ok := headers[h]; o.header.Get(h) != "" && !ok {
			out = append(out, fmt.Sprintf("header %s = %q is not documented", h, o.header.Get(h)))
		}
	}
	content, _ := resp["content"].(map[string]any)
	mt, _, err := mime.ParseMediaType(o.header.Get("Content-Type"))
	if err != nil {
		return append(out, fmt.Sprintf("Content-Type %q: %v", o.header.Get("Content-Type"), err))
	}
	media, ok := content[mt].(map[string]any)
	if !ok {
		return append(out, "Content-Type "+mt+" is not documented")
	}
	if mt != "application/json" {
		return out
	}
	dec := json.NewDecoder(bytes.NewReader(o.body))
	dec.UseNumber()
	var body any
	if err := dec.Decode(&body); err != nil {
		return append(out, fmt.Sprintf("body %q is not JSON: %v", o.body, err))
	}
	return append(out, mismatches("body", media["schema"], body)...)
}

// mismatches validates value against a resolved schema of the document.
func mismatches(what string, schema, value any) []string {
	raw, err := json.Marshal(schema)
	if err != nil {
		return []string{what + ": schema: " + err.Error()}
	}
	var s spec.Schema
	if err := json.Unmarshal(raw, &s); err != nil {
		return []string{what + ": schema: " + err.Error()}
	}
	var out []string
	for _, err := range validate.NewSchemaValidator(&s, nil, "", strfmt.Default).Validate(value).Errors {
		out = append(out, fmt.Sprintf("%s %v does not match the document: %v", what, value, err))
	}
	return out
}

// The checker itself finds departures: an undocumented code, a missing
// required header (Retry-After on a 503 above all), an undocumented header,
// a body of the wrong schema (an error body without its code, or with an
// unknown code, or a code the response does not document), a wrong
// Content-Type, and a header value outside its schema.
func TestCheckResponseFindsDepartures(t *testing.T) {
	sp := loadSpec(t)
	plain := http.Header{"Content-Type": {"application/json"}, indexHeader: {"5"}}
	retry := func(seconds string) http.Header {
		return http.Header{"Content-Type": {"application/json"}, indexHeader: {"5"}, "Retry-After": {seconds}}
	}
	status := `{"identity":"a","namespace":"n","lease":"l","leader":false,"holder":"","term":0,"fencingToken":0,"validForMs":0,"index":5,"candidate":true,"lastError":null}`
	for name, good := range map[string]observed{
		"shutdown":          {method: "GET", path: "/v1/watch", code: 503, header: retry("2"), body: []byte(`{"error":"shutting down","code":"shutting_down"}`)},
		"not leader":        {method: "GET", path: "/v1/token", code: 503, header: retry("1"), body: []byte(`{"error":"not leader","code":"not_leader"}`)},
		"leader status 503": {method: "GET", path: "/v1/leader", code: 503, header: retry("1"), body: []byte(status)},
		"leader shutdown":   {method: "GET", path: "/v1/leader", code: 503, header: retry("2"), body: []byte(`{"error":"x","code":"shutting_down"}`)},
		"bad parameter":     {method: "GET", path: "/v1/watch", code: 400, header: plain, body: []byte(`{"error":"x","code":"bad_parameter"}`)},
	} {
		if p := sp.problems(good); len(p) != 0 {
			t.Errorf("a conforming response (%s): %v", name, p)
		}
	}
	for name, o := range map[string]observed{
		"undocumented code":           {method: "GET", path: "/v1/status", code: 503, header: retry("1"), body: []byte(`{"error":"x","code":"not_leader"}`)},
		"Retry-After missing":         {method: "GET", path: "/v1/watch", code: 503, header: plain, body: []byte(`{"error":"x","code":"shutting_down"}`)},
		"Retry-After missing (token)": {method: "GET", path: "/v1/token", code: 503, header: plain, body: []byte(`{"error":"x","code":"not_leader"}`)},
		"Retry-After missing (503)":   {method: "GET", path: "/v1/leader", code: 503, header: plain, body: []byte(status)},
		"Retry-After missing (livez)": {method: "GET", path: "/livez", code: 503, header: plain, body: []byte(`{"error":"x","code":"election_stalled"}`)},
		"undocumented header":         {method: "GET", path: "/v1/status", code: 200, header: retry("1"), body: []byte(status)},
		"wrong body":                  {method: "GET", path: "/v1/status", code: 200, header: plain, body: []byte(`{"leader":true}`)},
		"neither body of oneOf":       {method: "GET", path: "/v1/leader", code: 503, header: retry("1"), body: []byte(`{"leader":"no"}`)},
		"error without code":          {method: "GET", path: "/v1/watch", code: 400, header: plain, body: []byte(`{"error":"x"}`)},
		"error without code (503)":    {method: "GET", path: "/v1/token", code: 503, header: retry("1"), body: []byte(`{"error":"not leader"}`)},
		"unknown code":                {method: "GET", path: "/v1/watch", code: 400, header: plain, body: []byte(`{"error":"x","code":"bad_wait"}`)},
		"code of another response":    {method: "GET", path: "/v1/watch", code: 400, header: plain, body: []byte(`{"error":"x","code":"not_found"}`)},
		"code of another 503":         {method: "GET", path: "/v1/token", code: 503, header: retry("1"), body: []byte(`{"error":"x","code":"shutting_down"}`)},
		"wrong Content-Type":          {method: "GET", path: "/v1/watch", code: 503, header: http.Header{"Content-Type": {"text/plain"}, "Retry-After": {"2"}}, body: []byte("x")},
		"Retry-After of 0":            {method: "GET", path: "/v1/watch", code: 503, header: retry("0"), body: []byte(`{"error":"x","code":"shutting_down"}`)},
		"Retry-After as a date":       {method: "GET", path: "/v1/watch", code: 503, header: retry("Wed, 21 Oct 2026 07:28:00 GMT"), body: []byte(`{"error":"x","code":"shutting_down"}`)},
		"negative index":              {method: "GET", path: "/v1/token", code: 503, header: http.Header{"Content-Type": {"application/json"}, indexHeader: {"-1"}, "Retry-After": {"1"}}, body: []byte(`{"error":"x","code":"not_leader"}`)},
	} {
		if p := sp.problems(o); len(p) == 0 {
			t.Errorf("%s: no problem found in %+v", name, o)
		}
	}
}

// errorCodes are the codes of errors.go, which the document's ErrorCode
// must list, in the same order.
var errorCodes = []errorCode{
	codeBadParameter, codeNotFound, codeMethodNotAllowed, codeConflict, codeNotLeader,
	codeNotReady, codeElectionStalled, codeShuttingDown, codeReleaseFailed, codeLeaseGroup, codeUnknownLease,
	codeUnknownSuccessor, codeNoHandover, codeTooManyBlocking,
}

// The document states the error contract for every operation: every error
// response (4xx, 5xx) is JSON whose schema requires a code from ErrorCode,
// so that a body without one fails; every 503, and no other status,
// documents a required Retry-After; ErrorCode lists exactly the codes of
// errors.go.
func TestOpenAPIErrorContract(t *testing.T) {
	sp := loadSpec(t)
	schemas, _ := sp.components["schemas"].(map[string]any)
	codes, _ := schemas["ErrorCode"].(map[string]any)
	var documented []string
	for _, c := range codes["enum"].([]any) {
		documented = append(documented, c.(string))
	}
	var want []string
	for _, c := range errorCodes {
		want = append(want, string(c))
	}
	if !slices.Equal(documented, want) {
		t.Errorf("ErrorCode enum %v, want the codes of errors.go %v", documented, want)
	}

	for path, item := range sp.paths {
		for method, op := range item.(map[string]any) {
			if !slices.Contains(httpMethods, method) {
				continue
			}
			responses, _ := op.(map[string]any)["responses"].(map[string]any)
			for status, resp := range responses {
				name := strings.ToUpper(method) + " " + path + " " + status
				resp := resp.(map[string]any)
				headers, _ := resp["headers"].(map[string]any)
				ra, _ := headers["Retry-After"].(map[string]any)
				switch {
				case status == "503" && (ra == nil || ra["required"] != true):
					t.Errorf("%s: Retry-After is not documented as required", name)
				case status != "503" && ra != nil:
					t.Errorf("%s: documents Retry-After, which only 503s carry", name)
				}
				if status < "400" {
					continue
				}
				media, _ := resp["content"].(map[string]any)["application/json"].(map[string]any)
				if media == nil {
					t.Errorf("%s: not JSON", name)
					continue
				}
				if p := mismatches(name, media["schema"], map[string]any{"error": "no code"}); len(p) == 0 {
					t.Errorf("%s: an error body without code matches the document", name)
				}
			}
		}
	}
}

// Real answers of every operation, in every state a client can meet
// without waiting, match the document.
func TestResponsesMatchOpenAPI(t *testing.T) {
	sp := loadSpec(t)
	f := newFixture(t, candidate())
	api, ops := f.srv.APIHandler(), f.srv.OpsHandler()
	// A request with a wrong method is checked against the 405 of its
	// path's operation, whose method is as.
	type request struct {
		h                    http.Handler
		method, target, path string
		as                   string
	}
	requests := []request{
		{api, "GET", "/v1/status", "/v1/status", ""},
		{api, "GET", "/v1/leader", "/v1/leader", ""},
		{api, "GET", "/v1/leader?wait=x", "/v1/leader", ""},
		{api, "GET", "/v1/token", "/v1/token", ""},
		{api, "GET", "/v1/watch", "/v1/watch", ""},
		{api, "GET", "/v1/watch?index=7", "/v1/watch", ""},
		{api, "GET", "/v1/watch?index=x", "/v1/watch", ""},
		{api, "GET", "/", "/", ""},
		{api, "PUT", "/v1/status", "/v1/status", "GET"},
		{api, "DELETE", "/v1/watch", "/v1/watch", "GET"},
		{api, "GET", "/v1/release", "/v1/release", "POST"},
		{api, "POST", "/v1/release?for=x", "/v1/release", ""},
		{api, "POST", "/v1/hold?token=1", "/v1/hold", ""}, // not our term: 409 (a granted hold stays open: hold_test.go)
		{api, "POST", "/v1/hold?token=x", "/v1/hold", ""},
		{api, "GET", "/v1/hold", "/v1/hold", "POST"},
		{ops, "GET", "/livez", "/livez", ""},
		{ops, "GET", "/readyz", "/readyz", ""},
		{ops, "GET", "/metrics", "/metrics", ""},
		{ops, "GET", "/v1/status", "/v1/status", ""},
		{ops, "GET", "/v1/leader", "/v1/leader", ""},
		{ops, "POST", "/readyz", "/readyz", "GET"},
		{api, "GET", "/v1/leases", "/v1/leases", ""},
		{api, "GET", "/v1/leases?index=7", "/v1/leases", ""},
		{api, "GET", "/v1/leases?index=x", "/v1/leases", ""},
		{api, "POST", "/v1/leases", "/v1/leases", "GET"},
		{api, "GET", "/v1/leases/orders-leader", "/v1/leases/{lease}", ""},
		{api, "GET", "/v1/leases/nope", "/v1/leases/{lease}", ""},
		{api, "DELETE", "/v1/leases/orders-leader", "/v1/leases/{lease}", "GET"},
		{api, "GET", "/v1/leases/orders-leader/leader", "/v1/leases/{lease}/leader", ""},
		{api, "GET", "/v1/leases/orders-leader/leader?wait=x", "/v1/leases/{lease}/leader", ""},
		{api, "GET", "/v1/leases/nope/leader", "/v1/leases/{lease}/leader", ""},
		{api, "GET", "/v1/leases/orders-leader/token", "/v1/leases/{lease}/token", ""},
		{api, "GET", "/v1/leases/nope/token", "/v1/leases/{lease}/token", ""},
		{api, "POST", "/v1/leases/orders-leader/token", "/v1/leases/{lease}/token", "GET"},
		{api, "POST", "/v1/leases/orders-leader/release?for=x", "/v1/leases/{lease}/release", ""},
		{api, "POST", "/v1/leases/nope/release", "/v1/leases/{lease}/release", ""},
		{api, "GET", "/v1/leases/orders-leader/release", "/v1/leases/{lease}/release", "POST"},
		{api, "POST", "/v1/leases/orders-leader/hold?token=1", "/v1/leases/{lease}/hold", ""},
		{api, "POST", "/v1/leases/orders-leader/hold?token=x", "/v1/leases/{lease}/hold", ""},
		{api, "POST", "/v1/leases/nope/hold?token=1", "/v1/leases/{lease}/hold", ""},
		{api, "GET", "/v1/leases/orders-leader/hold", "/v1/leases/{lease}/hold", "POST"},
		{ops, "GET", "/v1/leases", "/v1/leases", ""},
		{ops, "GET", "/v1/leases/orders-leader", "/v1/leases/{lease}", ""},
		{ops, "GET", "/v1/leases/orders-leader/leader", "/v1/leases/{lease}/leader", ""},
		{ops, "GET", "/v1/leases/nope/leader", "/v1/leases/{lease}/leader", ""},
	}
	check := func(state string, reqs []request) {
		for _, r := range reqs {
			o := recorded(cmp.Or(r.as, r.method), r.path, do(r.h, r.method, r.target))
			for _, p := range sp.problems(o) {
				t.Errorf("%s: %s %s → %d: %s", state, r.method, r.target, o.code, p)
			}
		}
	}
	check("candidate", requests)
	f.publish(following())
	check("following, with the holder's clock estimated", requests)
	f.publish(leading())
	check("leading", append(requests, request{api, "GET", "/v1/leader?wait=1m", "/v1/leader", ""}, request{api, "POST", "/v1/release", "/v1/release", ""}))
	f.publish(leading())
	check("leading (named)", append(requests, request{api, "GET", "/v1/leases/orders-leader/leader?wait=1m", "/v1/leases/{lease}/leader", ""},
		request{api, "POST", "/v1/leases/orders-leader/release", "/v1/leases/{lease}/release", ""}))
	f.clock.SetTime(t0.Add(3 * leaseDuration)) // the loop stalled: /livez fails
	f.srv.BeginShutdown()                      // /readyz fails
	check("stalled, shutting down", requests)
}

// Real answers of every operation in group mode, in every state a client
// can meet without waiting, match the document: the group's body, the
// named routes, the unnamed routes' 409s, unknown Leases' 404s, and the
// event stream's Content-Type.
func TestGroupResponsesMatchOpenAPI(t *testing.T) {
	sp := loadSpec(t)
	g := newGroupFixture(t, []elect.Snapshot{candidate(), candidate(), candidate()})
	api, ops := g.srv.APIHandler(), g.srv.OpsHandler()
	type request struct {
		h                    http.Handler
		method, target, path string
		header               []string
	}
	var requests []request
	for _, r := range routed(t, "api", g.srv.api) {
		_, mp, _ := strings.Cut(r, " ")
		method, path, _ := strings.Cut(mp, " ")
		for _, target := range []string{strings.ReplaceAll(path, "{lease}", "compactor"), strings.ReplaceAll(path, "{lease}", "nope")} {
			requests = append(requests, request{api, method, target, path, nil})
			if method == "POST" {
				requests = append(requests, request{api, method, target + "?token=1042&for=1s", path, nil})
			}
		}
	}
	for _, r := range routed(t, "ops", g.srv.ops) {
		_, mp, _ := strings.Cut(r, " ")
		method, path, _ := strings.Cut(mp, " ")
		requests = append(requests, request{ops, method, strings.ReplaceAll(path, "{lease}", "reporter"), path, nil})
	}
	requests = append(requests,
		request{api, "GET", "/v1/leases?index=x", "/v1/leases", nil},
		request{api, "GET", "/v1/leases?index=" + gidxs(0) + "&wait=1ms", "/v1/leases", nil},
		request{api, "GET", "/v1/leases/compactor/leader?wait=1ms", "/v1/leases/{lease}/leader", nil},
		request{ops, "GET", "/v1/leases/compactor/leader?wait=x", "/v1/leases/{lease}/leader", nil},
	)
	check := func(state string, reqs []request) {
		t.Helper()
		n := 0
		for _, r := range reqs {
			o := recorded(r.method, r.path, do(r.h, r.method, r.target, r.header...))
			for _, p := range sp.problems(o) {
				t.Errorf("%s: %s %s → %d: %s", state, r.method, r.target, o.code, p)
			}
			n++
		}
		if n < 30 {
			t.Errorf("%s: only %d requests checked", state, n)
		}
	}
	check("candidate", requests)
	lead := leading()
	lead.Token = 1042
	g.publish(1, lead)
	g.clock.SetTime(t0.Add(time.Second))
	check("compactor leading", requests)
	g.clock.SetTime(t0.Add(3 * leaseDuration))
	g.srv.BeginShutdown()
	check("stalled, shutting down", requests)
	g.srv.EndBlockingRequests()
	check("ended", append(requests,
		request{api, "GET", "/v1/leases?index=" + gidxs(1), "/v1/leases", nil},
		request{api, "GET", "/v1/leases", "/v1/leases", []string{"Accept", "text/event-stream"}},
		request{api, "GET", "/v1/leases", "/v1/leases", []string{"Accept", "text/event-stream", "Last-Event-ID", gidxs(1)}},
	))
}
