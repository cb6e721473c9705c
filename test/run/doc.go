// Package run proves `leasehold run` (internal/runner) end to end: real
// sidecar processes (the built binary) against a real kube-apiserver, each
// with a runner (the same binary, `leasehold run`) next to it that runs
// the beater (test/run/beater), which records every 5 ms when it runs and
// under which fencing token. A sampler polls every sidecar's /v1/status
// meanwhile. From the beats and the samples the tests check that:
//
//   - a command runs only while its instance leads: every beat carries a
//     token its sidecar reported while leader, and a run's first beat comes
//     at least the start delay after the term's acquiredAt;
//   - a partitioned leader's command stops by the end of its validity plus
//     grace (SIGTERM ignored: SIGKILL) or by the end of its validity
//     (SIGTERM obeyed), with 1s of slack for a loaded machine;
//   - runs of different instances never overlap (by the rule of
//     internal/testing/overlap, beats being instants), across handovers by
//     SIGTERM to the sidecar, POST /v1/release, a sidecar crash and a
//     partition, even with commands that ignore SIGTERM and are SIGKILLed
//     only at the end of grace;
//   - a release (POST /v1/release, SIGTERM to the sidecar) while the
//     leader's runner is paused (SIGSTOP) for longer than the start delay,
//     but not past the term's validity, waits until the resumed runner has
//     stopped its command (its hold, POST /v1/hold): the successor acquires
//     only after the old command has exited, and the runs do not overlap;
//   - a handover by SIGTERM to the leader's sidecar, with runners whose
//     commands obey SIGTERM, takes about the start delay (TestHandoverTime
//     logs the times);
//   - the runner exits with the command's status, also after SIGTERM;
//   - `leasehold install` copies the binary exactly.
//
// All code is in _test.go files (and the beater); run it with
// `go test ./test/run` (part of `make test`).
package run
