package httpapi

import (
	"net/http"
	"slices"
	"strings"

	"github.com/gorilla/mux"
)

// errorBody is the JSON body of every error answer: {"error": "..."}.
type errorBody struct {
	Error string `json:"error"`
}

// writeError answers code with {"error": msg}.
func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, errorBody{Error: msg})
}

// notFound answers requests for paths no route serves.
func notFound(w http.ResponseWriter, r *http.Request) {
	writeError(w, http.StatusNotFound, "no such endpoint: "+r.URL.Path)
}

// methodNotAllowed answers requests whose path r serves with other methods,
// listing those methods in Allow.
func methodNotAllowed(r *mux.Router) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		allowed := allowedMethods(r, req)
		w.Header().Set("Allow", strings.Join(allowed, ", "))
		writeError(w, http.StatusMethodNotAllowed, "method "+req.Method+" not allowed on "+req.URL.Path+"; allowed: "+strings.Join(allowed, ", "))
	})
}

// allowedMethods lists, sorted, the methods with which some route of r
// matches req's path.
func allowedMethods(r *mux.Router, req *http.Request) []string {
	var allowed []string
	_ = r.Walk(func(route *mux.Route, _ *mux.Router, _ []*mux.Route) error {
		methods, err := route.GetMethods()
		if err != nil {
			return nil // a route without a method restriction: none of ours
		}
		for _, m := range methods {
			probe := req.Clone(req.Context())
			probe.Method = m
			if route.Match(probe, &mux.RouteMatch{}) {
				allowed = append(allowed, m)
			}
		}
		return nil
	})
	slices.Sort(allowed)
	return slices.Compact(allowed)
}
