// Package runner is `leasehold run`, the second mode of the leasehold
// binary, in the style of `consul lock` and `etcdctl lock`: it runs a
// command only while this instance leads, for apps that cannot speak HTTP.
// It runs in the app container and talks to the sidecar's HTTP API only:
//
//	leasehold run [--sidecar http://127.0.0.1:4040] [--grace 3s] [--start-delay 4s] -- COMMAND [ARG...]
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
//     term, and only if, at that moment, the term still has validity left.
//     The start delay is longer than grace (by default grace + 1s). Why:
//     at a handover by release (POST /v1/release, a health step-down, a
//     sidecar stopped before the app) the previous holder's sidecar stops
//     reporting leadership before it writes the release, so the previous
//     holder's runner learns of the loss before the new holder can even
//     acquire; it SIGKILLs its command at most grace after that, which is
//     before the new holder's runner starts its command, a start delay
//     after it saw the new term. After a failover (the old holder dead or
//     cut off), the old runner stops its command by its local deadline
//     (rule 3): at most the old term's validity end (last renewal sent +
//     renewDeadline) plus grace; the new holder acquires no earlier than
//     leaseDuration after that renewal, and starts its command a start
//     delay later. Since leaseDuration > renewDeadline and the start delay
//     is longer than grace, runs never overlap, under the sidecar's own
//     assumption on clock rates. (Fencing still protects the data if a
//     process outlives its SIGKILL in the kernel, or a node's clock runs
//     fast.)
//
//  3. While the command runs, the runner keeps a local validity deadline:
//     the time it SENT the request plus the validForMs of the answer
//     (conservative: the sidecar computed the answer after it was sent; an
//     answer with more validity moves the deadline later). It watches with
//     wait = clamp(remaining/2, 50ms, 5m), so that it learns of a renewed
//     validity before the deadline. The deadline fires from a timer whether
//     or not a request is in flight, or the runner is waiting to ask again:
//     an unreachable sidecar is retried with a short backoff, and one that
//     answers with Retry-After (503 while it shuts down) is asked again
//     after that long, within [100ms, 30s]; both are logged.
//
//  4. When leadership is lost (an answer with leader:false, or with another
//     fencing token: a new term makes the token in the command's
//     environment stale) or the deadline passes, the runner sends SIGTERM to
//     the command's process group, and SIGKILL to the group once grace has
//     passed if the command, or any process of its group, still runs. It
//     reaps the command, logs, and waits for leadership again, to run the
//     command again: it is a supervisor, it does not exit.
//
//  5. When the command ends on its own, the runner SIGKILLs whatever is left
//     of its process group and exits with the command's status (a death by
//     signal n is 128+n, as shells report it).
//
//  6. On SIGTERM or SIGINT the runner stops a running command as in 4 and
//     exits with its status (128+n if signal n killed it); with no command
//     running it exits 0.
//
//  7. A command line that breaks a rule exits 2 with one line naming the
//     flag and the rule. A command that cannot be started is named in the
//     log and the runner exits 1, also when it cannot be started while
//     leading (it does not retry).
//
// The runner's timers (start delay, validity deadline, grace, retry
// backoff) run on a k8s.io/utils/clock Clock, which tests replace with a
// fake one.
package runner
