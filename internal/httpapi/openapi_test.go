package httpapi

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/gorilla/mux"
	"sigs.k8s.io/yaml"
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
