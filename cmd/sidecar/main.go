// Command sidecar is leasehold: it holds a coordination.k8s.io/v1 Lease on
// behalf of the application container next to it and answers, on localhost
// HTTP, whether this instance leads, until when, and with which fencing
// token. Configuration is LEASEHOLD_* environment variables (see
// internal/config).
//
// With no arguments (or `leasehold sidecar`) the binary is the sidecar.
// Exit status: 0 after SIGTERM or SIGINT (leadership given up, Lease
// released if LEASEHOLD_RELEASE_ON_SHUTDOWN); 2 for a configuration error,
// reported on one line naming the variable; 1 for any other failure.
//
// The first argument chooses another mode (cli.go lists them; `leasehold
// help` prints the usage):
//
//	leasehold status|token|wait|release [--addr HOST:PORT] [-o text|json] ...
//	leasehold run [--addr URL] [--grace D] [--start-delay D] -- COMMAND [ARG...]
//	leasehold install PATH
//	leasehold version | help [COMMAND]
//
// status, token, wait and release are clients of the local sidecar's API,
// for `kubectl exec` and preStop hooks in the image (the binary alone). run, in the
// app container, runs COMMAND only while this instance leads, as the
// sidecar reports (internal/runner, docs/run.md). install copies the binary
// to PATH, for an init container that shares it with the app container
// through an emptyDir. An argument leasehold does not know is a usage error
// (exit 2): it never starts a candidate.
package main

import (
	"context"
	"os"
	"time"
)

// version is stamped at build time with -ldflags "-X main.version=...";
// currentVersion falls back to the build information Go records.
var version = "dev"

func main() {
	os.Exit(cli(os.Args[1:], &env{
		ctx:     context.Background(),
		stdout:  os.Stdout,
		stderr:  os.Stderr,
		getenv:  os.Getenv,
		now:     time.Now,
		sidecar: run,
	}))
}
