package node_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// benchJSONEnv names a directory (docs/benchmarks, the bench's section
// files; relative to the repository) into which TestMemoryBesideClientGo
// writes its figures as node.json; unset, it writes nothing.
const benchJSONEnv = "LEASEHOLD_BENCH_JSON"

// nodeFigures is node.json: the bench's benchdoc.Node (bench/benchdoc,
// whose doc comments are the schema), which renders the document's
// section on memory per pod. Durations are in time.Duration's notation,
// sizes in bytes.
type nodeFigures struct {
	Run          nodeRun `json:"run"`
	Samples      int     `json:"samples"`
	Every        string  `json:"every"`
	Rest         string  `json:"rest"`
	Watchers     int     `json:"watchers"`
	Request      int64   `json:"request"`
	Limit        int64   `json:"limit"`
	Idle         int64   `json:"idle"`
	WithWatchers int64   `json:"withWatchers"`
	Baseline     int64   `json:"baseline"`
	Restarts     int32   `json:"restarts"`
}

type nodeRun struct {
	Command string `json:"command"`
	Date    string `json:"date"`
	Machine string `json:"machine"`
}

// writeBenchJSON writes f as node.json into the directory benchJSONEnv
// names, if it names one.
func writeBenchJSON(t *testing.T, f nodeFigures) {
	t.Helper()
	dir := os.Getenv(benchJSONEnv)
	if dir == "" {
		return
	}
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(root, dir)
	}
	f.Run = nodeRun{
		Command: "make node-e2e NODE_E2E_RUN=TestMemoryBesideClientGo " + benchJSONEnv + "=" + os.Getenv(benchJSONEnv),
		Date:    time.Now().UTC().Format("2006-01-02 15:04 MST"),
		Machine: fmt.Sprintf("%d CPUs, %s/%s, %s, shared and noisy", runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, runtime.Version()),
	}
	data, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "node.json"), append(data, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("figures written to %s", filepath.Join(dir, "node.json"))
}
