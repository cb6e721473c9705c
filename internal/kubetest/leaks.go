package kubetest

import "go.uber.org/goleak"

// CheckGoroutines fails (returns an error) if any goroutine of the tests
// outlived them, ignoring the connections that client-go's shared HTTP
// transports keep alive and klog's flush daemon, which belong to no test.
func CheckGoroutines() error {
	return goleak.Find(
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreTopFunction("golang.org/x/net/http2.(*ClientConn).readLoop"),
		goleak.IgnoreAnyFunction("k8s.io/klog/v2.(*flushDaemon).run.func1"),
	)
}
