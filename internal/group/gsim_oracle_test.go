package group

import (
	"bufio"
	"crypto/sha256"
	"encoding/json"
	"flag"
	"fmt"
	"hash"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
)

var (
	oracleOut   = flag.String("oracle.out", "", "write the digests of seeds 1..oracle.seeds to this file")
	oracleSeeds = flag.Int("oracle.seeds", 1000, "seeds the oracle digests")
	oracleFirst = flag.Uint64("oracle.first", 401, "first seed the oracle digests")
)

// oracleDigest plays seed twice: traced (every step's input and output as
// the trace prints them) and untraced (every commit's full object, its
// time, and the outcome), and digests each.
func oracleDigest(seed uint64) string {
	var parts []string
	for _, tracing := range []bool{true, false} {
		h := sha256.New()
		s := newGSim(seed)
		s.tracing = tracing
		inner := s.store.committed
		s.store.committed = func(name, rv string, l, gone *coordinationv1.Lease) {
			oracleCommit(h, s, name, rv, l, gone)
			inner(name, rv, l, gone)
		}
		err := s.run()
		fmt.Fprintf(h, "end %d now %d seq %d rev %d steps %d err %v late %v take %v\n", s.end, s.now, s.seq, s.store.rev, s.steps, err, s.check.late, s.check.takeLate)
		fmt.Fprintf(h, "%d %d %d %d %d %d %d %d %d %d %d\n", s.declines, s.watchers, s.handovers, s.adopted, s.undated, s.rewithdrawn, s.handOvers, s.collected, s.ghosts, s.edits, s.check.handed)
		for _, line := range s.trace {
			fmt.Fprintln(h, line)
		}
		parts = append(parts, fmt.Sprintf("%x", h.Sum(nil))[:16])
	}
	return strings.Join(parts, " ")
}

func oracleCommit(h hash.Hash, s *gsim, name, rv string, l, gone *coordinationv1.Lease) {
	b, _ := json.Marshal(l)
	fmt.Fprintf(h, "%d %s %s %s %v\n", s.now, name, rv, b, gone == nil)
}

func TestGSimOracle(t *testing.T) {
	if *oracleOut == "" {
		t.Skip("no -oracle.out")
	}
	first, n := *oracleFirst, uint64(*oracleSeeds)
	digests := make([]string, n)
	seeds := make(chan uint64)
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for seed := range seeds {
				digests[seed-first] = oracleDigest(seed)
			}
		})
	}
	for seed := first; seed < first+n; seed++ {
		seeds <- seed
	}
	close(seeds)
	wg.Wait()
	f, err := os.Create(*oracleOut)
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriter(f)
	all := sha256.New()
	for i, d := range digests {
		fmt.Fprintf(w, "%d %s\n", first+uint64(i), d)
		fmt.Fprintf(all, "%d %s\n", first+uint64(i), d)
	}
	t.Logf("oracle: seeds %d..%d: %x", first, first+n-1, all.Sum(nil))
	w.Flush()
	f.Close()
}
