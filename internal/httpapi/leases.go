package httpapi

import (
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	"github.com/gorilla/mux"

	"github.com/leasehold/leasehold/internal/group"
	"github.com/leasehold/leasehold/pkg/api"
)

// Leases is the JSON body of GET /v1/leases: pkg/api's, whose field names
// are public contract.
type Leases = api.Leases

// leasesOf describes the group at snap's Index, every Lease as its
// election's latest Snapshot says, judged at one same instant (statusOf for
// each Lease). The Leases are read from the elections, not from snap: the
// group publishes a step-down a moment after the election does, and
// leadership is never answered from a snapshot older than the election's
// latest.
func (s *Server) leasesOf(snap *group.Snapshot) Leases {
	now := s.clock.Now()
	l := Leases{Index: snap.Index, Leases: make([]Status, 0, len(s.elections))}
	if snap.Membership {
		members := snap.Members
		l.Members = &members
	}
	for _, el := range s.elections {
		l.Leases = append(l.Leases, s.statusAt(el.Snapshot(), now))
	}
	return l
}

// handleLeases serves GET /v1/leases[?index=N&wait=D]: 200 with every
// Lease's status (Leases). It is a blocking query on the group's Index
// with exactly the semantics of GET /v1/watch on an election's
// (handleWatch), Server-Sent Events included: with Accept:
// text/event-stream it streams events named leases whose data is the
// Leases body and whose id is the group's Index.
func (s *Server) handleLeases(w http.ResponseWriter, r *http.Request) {
	watch(s, w, r, s.groupSource())
}

// electionHandler is a handler that acts on one election.
type electionHandler func(w http.ResponseWriter, r *http.Request, el Election)

// unnamed serves h on the single election, for the routes that name no
// Lease (/v1/status, /v1/leader, ...). In group mode they cannot tell
// which Lease they are about: 409 with code lease_group, pointing at the
// named routes.
func (s *Server) unnamed(h electionHandler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.grouped {
			writeError(w, http.StatusConflict, codeLeaseGroup, s.leaseGroupMessage(r))
			return
		}
		h(w, r, s.election)
	}
}

// named serves h on the election that the route's {lease} names, with
// X-Leasehold-Index set to that election's latest Index; 404 with code
// unknown_lease when no election has that name.
func (s *Server) named(h electionHandler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		name := mux.Vars(r)["lease"]
		el, ok := s.byName[name]
		if !ok {
			writeError(w, http.StatusNotFound, codeUnknownLease,
				"no Lease "+strconv.Quote(name)+" here; this sidecar serves "+s.leaseList()+" (GET /v1/leases lists them)")
			return
		}
		setIndex(w, el.Snapshot())
		h(w, r, el)
	}
}

// namedPaths maps each unnamed route to the route that does the same for
// one Lease of a group.
var namedPaths = map[string]string{
	"/v1/status":  "GET /v1/leases/{lease}",
	"/v1/leader":  "GET /v1/leases/{lease}/leader",
	"/v1/token":   "GET /v1/leases/{lease}/token",
	"/v1/watch":   "GET /v1/leases?index=N (every Lease's status, blocking; or GET /v1/leases/{lease}/leader?wait=D)",
	"/v1/release": "POST /v1/leases/{lease}/release",
	"/v1/hold":    "POST /v1/leases/{lease}/hold",
	"/":           "GET /v1/leases (every Lease's holder)",
}

// leaseGroupMessage is the error message of an unnamed route in group
// mode.
func (s *Server) leaseGroupMessage(r *http.Request) string {
	use, ok := namedPaths[r.URL.Path]
	if !ok {
		use = "/v1/leases/{lease}"
	}
	return "this sidecar serves a lease group of " + s.leaseList() + ", and " + r.URL.Path +
		" names no Lease: use " + use + "; GET /v1/leases lists every Lease"
}

// leaseList names the Leases served, for error messages.
func (s *Server) leaseList() string {
	if len(s.names) == 1 {
		return "1 Lease (" + quoteSome(s.names) + ")"
	}
	return strconv.Itoa(len(s.names)) + " Leases (" + quoteSome(s.names) + ")"
}

// logFor is the logger for a request on el: in group mode it names el's
// Lease.
func (s *Server) logFor(el Election) *slog.Logger {
	if !s.grouped {
		return s.log
	}
	return s.log.With("lease", el.Snapshot().Lease)
}

// quoteSome quotes the first few names, and says how many more there are.
func quoteSome(names []string) string {
	const shown = 4
	quoted := make([]string, 0, shown)
	for i, n := range names {
		if i == shown {
			quoted = append(quoted, "and "+strconv.Itoa(len(names)-shown)+" more")
			break
		}
		quoted = append(quoted, strconv.Quote(n))
	}
	return strings.Join(quoted, ", ")
}
