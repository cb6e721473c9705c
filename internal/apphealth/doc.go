// Package apphealth probes the app that leasehold stands beside, so that
// leasehold campaigns only while that app is healthy and steps down when it
// stops being so (health-gated candidacy).
//
// A Prober sends GET requests to one HTTP(S) URL (LEASEHOLD_APP_HEALTH_URL)
// at once and then every Interval, and keeps an immutable Status that any
// goroutine may read. One goroutine (Run's) owns every piece of probe state.
//
// # Contract
//
//   - Not healthy until proven: a new Prober is unhealthy, and stays so
//     until SuccessThreshold probes in a row answer 2xx, however many
//     probes fail before. A candidate therefore never campaigns on an app
//     it has not yet seen healthy.
//   - SuccessThreshold consecutive successes make an unhealthy Prober
//     healthy, at start and after a failure alike; fewer leave it
//     unhealthy (Status.ConsecutiveSuccesses counts them), and any failure
//     in between starts the count again. With SuccessThreshold 1, one
//     success is enough. This is the damping of a flapping check: after it
//     withdrew from the election, an instance rejoins only once its app
//     has passed SuccessThreshold probes in a row, so a check that fails
//     and passes in turns moves no Lease back and forth.
//   - FailureThreshold consecutive failures make a healthy Prober
//     unhealthy; fewer leave it healthy (Status.ConsecutiveFailures counts
//     them). Any success in between starts the count again.
//   - The rule is one pure function of the previous Status and the probe's
//     result (judge), table-tested on its own.
//   - A probe fails on a transport error (refused, reset, DNS, TLS, ...),
//     on a timeout (each request has its own deadline of Timeout, which
//     covers connecting, the headers and reading the body), and on any
//     status outside 200–299. Redirects are not followed: a 3xx answer is a
//     failure, also with a caller-supplied Client.
//   - Requests: GET, "User-Agent: leasehold-probe", "Accept: */*"; at most
//     4 KiB of the body is read, then discarded. The default client never
//     uses a proxy (HTTP_PROXY and friends are not consulted, so a proxy
//     meant for the app's outbound traffic never carries the health check)
//     and opens a fresh connection for every probe (keep-alives disabled,
//     as in the kubelet's probes), so a hung app is not hidden by an idle,
//     kept-alive connection. It verifies TLS certificates as Go does by
//     default; supply a Client to probe an app with a self-signed
//     certificate.
//   - Probes never overlap: the next one starts at the next tick of an
//     Interval ticker after the previous one ended (Timeout ≤ Interval, so
//     at most one tick falls into a probe, and it is held, not dropped).
//   - OnChange is called from Run's goroutine on every change of Healthy,
//     including the first success, with the new Status, after Status()
//     already returns it. The next probe waits until OnChange returns.
//   - A probe interrupted because Run's context ended is discarded: it
//     changes neither the Status, nor the metrics, nor calls OnChange.
//     Run returns nil when its context ends, also while a probe hangs, and
//     leaves no goroutine behind.
//
// # Metrics
//
// leasehold_app_healthy (gauge, 1 while healthy, 0 before the first success
// and while unhealthy), leasehold_app_health_checks_total{result="success"|
// "failure"} and leasehold_app_health_check_duration_seconds (histogram of
// the probes' real wall-clock durations).
package apphealth
