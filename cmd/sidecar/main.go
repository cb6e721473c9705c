// Command sidecar is leasehold: it holds a coordination.k8s.io/v1 Lease on
// behalf of the application container next to it and answers, on localhost
// HTTP, whether this instance leads, until when, and with which fencing
// token. Configuration is LEASEHOLD_* environment variables (see
// internal/config).
//
// Exit status: 0 after SIGTERM or SIGINT (leadership given up, Lease
// released if LEASEHOLD_RELEASE_ON_SHUTDOWN); 2 for a configuration error,
// reported on one line naming the variable; 1 for any other failure.
//
// The same binary has two more modes, chosen by the first argument:
//
//	leasehold run [--sidecar URL] [--grace D] [--start-delay D] -- COMMAND [ARG...]
//	leasehold install PATH
//
// run, in the app container, runs COMMAND only while this instance leads,
// as the sidecar reports (internal/runner, docs/run.md). install copies the
// binary to PATH, for an init container that shares it with the app
// container through an emptyDir.
package main

import (
	"os"
)

// version is stamped at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "run":
			os.Exit(runCommand(os.Args[2:], os.Stdout, os.Stderr))
		case "install":
			os.Exit(installCommand(os.Args[2:], os.Stderr))
		}
	}
	os.Exit(run(os.Stderr))
}
