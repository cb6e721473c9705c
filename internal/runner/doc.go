// Package runner is `leasehold run`, the second mode of the leasehold
// binary, in the style of `consul lock` and `etcdctl lock`: it runs a
// command only while this instance leads, for apps that cannot speak HTTP.
// It runs in the app container and talks to the sidecar's HTTP API only,
// through pkg/client:
//
//	leasehold run [--addr http://127.0.0.1:4040] [--grace 3s] [--start-delay 4s] -- COMMAND [ARG...]
//
// # Safety contract
//
//  1. The runner follows the sidecar through the long-poll watch
//     (GET /v1/watch?index=…&wait=…). It starts the command, with
//     LEASEHOLD_FENCING_TOKEN=<token> and LEASEHOLD_TERM=<term> added to its
//     inherited environment, in a process group of its own, so that signals
//     reach the command's children too. The command is killed if the runner
//     dies (PR_SET_PDEATHSIG).
//
//  2. Start delay. The command starts only once the runner has seen this
//     instance lead the same term (the same fencing token) continuously for
//     the start delay, measured from the answer in which it first saw that
//     term, only if, at that moment, the term still has validity left, and
//     only once the sidecar has granted a hold on that term (rule 3). The
//     start delay is longer than grace (by default grace + 1s).
//
//  3. Hold. When the start delay has passed, the runner asks the sidecar to
//     hold the term (POST /v1/hold?token=<token>), on a goroutine of its
//     own, and starts the command only if the hold is granted while the
//     term is still the current one, with validity left. It keeps the
//     hold's connection open while the command runs, and closes it only once
//     the command has exited and been reaped (on its own, after SIGTERM, or
//     after SIGKILL at the end of grace). The sidecar grants a hold only
//     while it leads that term and is not releasing it; a refusal (409: the
//     term is ending, or any other answer but 404) means the command never
//     starts for that term. While the hold is open, every voluntary release
//     of the term (POST /v1/release, a health step-down, the sidecar's
//     SIGTERM) ends the term at once but writes the release only once the
//     hold has ended, and at the latest when the term's validity ends. A
//     runner that dies gives its hold up (the kernel closes its
//     connection); one that is paused keeps it. A request without an answer
//     is asked again after a backoff (100ms, doubling up to 1s) while the
//     term lasts; one still in flight when the term ends is abandoned (and
//     a hold granted for a term that is over is closed at once). A sidecar
//     that answers 404 (older than holds) is logged once, and from then on
//     commands start without a hold, as before holds existed. A hold that
//     the sidecar ends while the command runs (it shuts down after its
//     election stopped, or it is gone) is logged; the validity deadline
//     (rule 4) still governs. Every hold's goroutine has ended when Run
//     returns.
//
//  4. While the command runs, the runner keeps a local validity deadline:
//     the time it SENT the request plus the validForMs of the answer (an
//     answer with more validity moves the deadline later). It watches with
//     wait = clamp(remaining/2, 50ms, 5m), so that it learns of a renewed
//     validity before the deadline. The deadline fires from a timer whether
//     or not a request is in flight, or the runner is waiting to ask again:
//     an unreachable sidecar is retried with a short backoff, and one that
//     answers with Retry-After (503 while it shuts down) is asked again
//     after that long, within [100ms, 30s]; both are logged.
//
//  5. When leadership is lost (an answer with leader:false, or with another
//     fencing token: a new term makes the token in the command's
//     environment stale) or the deadline passes, the runner sends SIGTERM to
//     the command's process group, and SIGKILL to the group once grace has
//     passed if the command, or any process of its group, still runs. It
//     reaps the command, ends its hold, logs, and waits for leadership
//     again, to run the command again: it is a supervisor, it does not exit.
//
//  6. When the command ends on its own, the runner SIGKILLs whatever is left
//     of its process group, ends its hold, and exits with the command's
//     status (a death by signal n is 128+n, as shells report it).
//
//  7. On SIGTERM or SIGINT the runner stops a running command as in 5 (the
//     hold lasts until the command has exited, not until the signal) and
//     exits with its status (128+n if signal n killed it); with no command
//     running it exits 0.
//
//  8. A command line that breaks a rule exits 2 with one line naming the
//     flag and the rule. A command that cannot be started is named in the
//     log and the runner exits 1, also when it cannot be started while
//     leading (it does not retry).
//
// Together, the start delay and the hold keep the runs of two instances
// apart at a handover by release, and the validity deadline and the start
// delay at a failover; why, and where only fencing protects the data, is in
// docs/design.md ("leasehold run: why runs of two instances never
// overlap").
//
// The runner's timers (start delay, validity deadline, grace, retry
// backoff) run on a k8s.io/utils/clock Clock, which tests replace with a
// fake one.
package runner
