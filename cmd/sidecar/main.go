// Command sidecar is leasehold: it holds a coordination.k8s.io/v1 Lease on
// behalf of the application container next to it and answers, on localhost
// HTTP, whether this instance leads, until when, and with which fencing
// token. Configuration is LEASEHOLD_* environment variables (see
// internal/config).
//
// Exit status: 0 after SIGTERM or SIGINT (leadership given up, Lease
// released if LEASEHOLD_RELEASE_ON_SHUTDOWN); 2 for a configuration error,
// reported on one line naming the variable; 1 for any other failure.
package main

import (
	"os"
)

// version is stamped at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() { os.Exit(run(os.Stderr)) }
