package main_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"syscall"
	"testing"

	"github.com/leasehold/leasehold/internal/testing/fleet"
)

// duplicateKeys returns the keys that one JSON log line carries more than
// once at its top level (slog's JSON handler writes a key as often as it
// is given, and encoding/json keeps only the last).
func duplicateKeys(line []byte) ([]string, error) {
	dec := json.NewDecoder(bytes.NewReader(line))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, fmt.Errorf("not a JSON object: %q", line)
	}
	seen := map[string]bool{}
	var dups []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key := tok.(string)
		if seen[key] {
			dups = append(dups, key)
		}
		seen[key] = true
		var value json.RawMessage
		if err := dec.Decode(&value); err != nil {
			return nil, err
		}
	}
	return dups, nil
}

// leasesOf describes what in answers on GET /v1/leases, for a failure's
// report.
func leasesOf(t *testing.T, in *fleet.Instance) string {
	l, err := in.Leases(t.Context())
	return fmt.Sprintf("%s: %+v (err %v)", in.Name, l, err)
}

// logOf returns in's log as written so far.
func logOf(t *testing.T, in *fleet.Instance) []byte {
	t.Helper()
	data, err := os.ReadFile(in.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// Every line a group member logs carries each key once, the group's name
// included: through joining and balancing, a graceful exit that hands its
// Leases over, and a crash whose member Lease the survivor collects.
func TestGroupLogLinesCarryEachKeyOnce(t *testing.T) {
	f := newFleet(t)
	f.Env = []string{"LEASEHOLD_SHARDS=3", "LEASEHOLD_LOG_LEVEL=debug"}
	a := start(t, f, "a")
	b := start(t, f, "b")
	c := start(t, f, "c")
	leadsAll := func(in *fleet.Instance, n int) func() bool {
		return func() bool {
			l, err := in.Leases(t.Context())
			leading := 0
			for _, st := range l.Leases {
				if st.Leader {
					leading++
				}
			}
			return err == nil && leading == n
		}
	}
	for _, in := range []*fleet.Instance{a, b, c} {
		eventually(t, in.Name+" leading one shard", leadsAll(in, 1), func() string { return leasesOf(t, in) })
	}
	terminate(t, a)
	if err := c.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-c.Exited()
	eventually(t, "b leading all three shards and collecting c's member Lease", func() bool {
		return leadsAll(b, 3)() && bytes.Contains(logOf(t, b), []byte("deleted the member Lease of a departed member"))
	}, func() string { return leasesOf(t, b) })
	stopGracefully(t, b)

	for _, in := range []*fleet.Instance{a, b, c} {
		lines := bytes.Split(bytes.TrimSpace(logOf(t, in)), []byte("\n"))
		grouped := 0
		for _, line := range lines {
			dups, err := duplicateKeys(line)
			if err != nil {
				t.Fatalf("%s: %v", in.Name, err)
			}
			if len(dups) > 0 {
				t.Errorf("%s logs %v more than once: %s", in.Name, dups, line)
			}
			if bytes.Contains(line, []byte(`"group":"app"`)) {
				grouped++
			}
		}
		if grouped == 0 {
			t.Errorf("%s: no log line names the group (of %d lines)", in.Name, len(lines))
		}
	}
}
