package kubetest

import (
	"fmt"
	"os"

	"go.uber.org/goleak"
)

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

// LeakCheck returns code, or 1 when code is 0 but a goroutine outlived the
// tests (CheckGoroutines; the leak is reported on stderr). For TestMain:
//
//	os.Exit(kubetest.LeakCheck(m.Run()))
func LeakCheck(code int) int {
	if code != 0 {
		return code
	}
	if err := CheckGoroutines(); err != nil {
		fmt.Fprintln(os.Stderr, "goroutine leak:", err)
		return 1
	}
	return 0
}
