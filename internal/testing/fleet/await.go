package fleet

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/leasehold/leasehold/internal/httpapi"
)

// Leadership is the answer of the first instance that reported leading.
type Leadership struct {
	Instance *Instance
	Status   httpapi.Status
	At       time.Time // when its 200 arrived (monotonic)
}

// AwaitLeadership long-polls GET /v1/leader?wait=... on every instance at
// once and returns the first that answers 200, with the time its answer
// arrived. It is how the demo and the benchmarks time a handover or a
// failover without polling: start it, send the signal, and subtract.
// Instances that die meanwhile are ignored. All requests have ended when it
// returns.
func AwaitLeadership(ctx context.Context, instances []*Instance) (Leadership, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	first := make(chan Leadership, len(instances))
	var polls sync.WaitGroup
	for _, inst := range instances {
		polls.Go(func() {
			for ctx.Err() == nil {
				var st httpapi.Status
				code, err := getWait(ctx, inst.APIURL+"/v1/leader?wait=1m", &st)
				if err == nil && code == http.StatusOK {
					first <- Leadership{Instance: inst, Status: st, At: time.Now()}
					return
				}
				select {
				case <-inst.Exited():
					return
				case <-ctx.Done():
					return
				case <-time.After(10 * time.Millisecond): // only after an error or the wait ended
				}
			}
		})
	}
	done := make(chan struct{})
	go func() { polls.Wait(); close(done) }()
	select {
	case l := <-first:
		cancel()
		<-done
		return l, nil
	case <-done:
		select {
		case l := <-first:
			return l, nil
		default:
			return Leadership{}, fmt.Errorf("%w: %v", ErrNoLeader, ctx.Err())
		}
	}
}
