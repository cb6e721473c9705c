package main

import (
	"fmt"
	"io"
)

// printSummary tells what happened and what the numbers mean.
func printSummary(out io.Writer, width int, res results) {
	t := res.terms
	fmt.Fprintln(out)
	fmt.Fprintln(out, "Summary")
	fmt.Fprintf(out, "  elected   %-44s fencing token %v, term %d\n",
		fmt.Sprintf("%s, among %d candidates", t[0].name, len(names)), t[0].status.FencingToken, t[0].status.Term)
	fmt.Fprintf(out, "  failover  %-44s fencing token %v → %v\n",
		fmt.Sprintf("SIGKILL %s → %s led after %s", res.failoverVictim, t[1].name, measured(res.failover)),
		t[0].status.FencingToken, t[1].status.FencingToken)
	fmt.Fprintf(out, "  handover  %-44s fencing token %v → %v\n",
		fmt.Sprintf("SIGTERM %s → %s led after %s", res.handoverVictim, t[2].name, measured(res.handover)),
		t[1].status.FencingToken, t[2].status.FencingToken)
	fmt.Fprintln(out)

	paragraphs := []string{
		fmt.Sprintf("Failover ≈ leaseDuration. A crashed leader cannot release the Lease, so the others may take it only "+
			"once it has gone unchanged for leaseDuration (%v), judged by their own clocks. Its last renewal came up to "+
			"retryPeriod (%v) before the kill, so expect %v–%v plus a round trip; with the production defaults "+
			"(15s/10s/2s), 13–15s. The dead leader's own validity (renewDeadline, %v after its last renewal) ran out "+
			"before that, so two valid leaders never overlap.",
			leaseDuration, retryPeriod, leaseDuration-retryPeriod, leaseDuration, renewDeadline),
		"Handover ≈ one round trip. On SIGTERM the sidecar stops claiming leadership, releases the Lease and exits; " +
			"the candidates watch the Lease and take it at once, whatever the timings.",
	}
	tokens := tokensOf(t)
	if increasing(tokens) {
		paragraphs = append(paragraphs, "Fencing tokens "+joinTokens(tokens, " < ")+": every new term got a larger token, "+
			"whether the leader crashed or stepped down.")
	} else {
		paragraphs = append(paragraphs, "✗ Fencing tokens "+joinTokens(tokens, ", ")+" did NOT strictly increase.")
	}
	for _, p := range paragraphs {
		for _, l := range wrap(p, width-3) {
			fmt.Fprintln(out, "  "+l)
		}
	}
	fmt.Fprintln(out, "  Sidecar API: GET /v1/status, GET /v1/leader?wait=D, GET /v1/watch?index=N&wait=D (api/openapi.yaml).")
}
