package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/leasehold/leasehold/pkg/client"
)

// Output formats of the client commands (-o).
const (
	outputText = "text"
	outputJSON = "json"
)

// clientFlags are the flags every client command (status, token, wait,
// release) has.
type clientFlags struct {
	addr   string
	output string
	lease  string // --lease: a Lease of the sidecar's group; "" for its one Lease
}

// addClientFlags defines --addr and -o on fs. The default address is
// LEASEHOLD_API_ADDR when set: in the sidecar's own container (kubectl
// exec, a preStop hook) that is where the sidecar listens.
func addClientFlags(fs *flag.FlagSet, getenv func(string) string, outputHelp string) *clientFlags {
	f := &clientFlags{}
	def := client.DefaultAddr
	if v := getenv("LEASEHOLD_API_ADDR"); v != "" {
		def = v
	}
	fs.StringVar(&f.addr, "addr", def,
		"the sidecar's API at `HOST:PORT`, http://HOST:PORT or https://HOST:PORT (the default is $LEASEHOLD_API_ADDR when set)")
	fs.StringVar(&f.output, "o", outputText, "output `format`: "+outputHelp)
	fs.StringVar(&f.lease, "lease", "", "with a lease group: the Lease `NAME` to ask about (GET /v1/leases lists them)")
	return f
}

// client checks the flags and returns the client they describe (with
// --lease, of that Lease of the group); an error is a usage error.
func (f *clientFlags) client() (*sidecarClient, error) {
	if f.output != outputText && f.output != outputJSON {
		return nil, fmt.Errorf("-o %q: want text or json", f.output)
	}
	if strings.ContainsAny(f.lease, "/?#%") {
		return nil, fmt.Errorf("--lease %q: want the name of a Lease of the sidecar's group", f.lease)
	}
	base, err := client.ParseAddr(f.addr)
	if err != nil {
		return nil, fmt.Errorf("--addr %w", err)
	}
	c, err := newSidecarClient(base, f.lease)
	if err != nil {
		return nil, fmt.Errorf("--addr %w", err)
	}
	return c, nil
}

// clientCommandFlags builds the flag set of a client command: --addr, -o
// and what more adds.
func clientCommandFlags(name string, getenv func(string) string, outputHelp string) (*flag.FlagSet, *clientFlags) {
	fs := flag.NewFlagSet("leasehold "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs, addClientFlags(fs, getenv, outputHelp)
}

// failed reports err, from a request to the sidecar, on stderr and returns
// the exit status: exitUsage for a value the sidecar refused (400) and for
// a lease group asked without --lease (409), exitNoAnswer for anything
// else.
func failed(e *env, name string, err error) int {
	fmt.Fprintf(e.stderr, "leasehold %s: %v\n", name, err)
	if r, ok := errors.AsType[*client.Error](err); ok && r.StatusCode == 400 {
		return exitUsage
	}
	if r, ok := errors.AsType[*client.Error](err); ok && r.StatusCode == 409 {
		fmt.Fprintf(e.stderr, "leasehold %s: the sidecar holds a lease group: name the Lease with --lease NAME (GET /v1/leases lists them)\n", name)
		return exitUsage
	}
	if _, ok := errors.AsType[*unreachableError](err); ok {
		fmt.Fprintf(e.stderr, "leasehold %s: is the leasehold sidecar running in this pod, listening on that address? (--addr; LEASEHOLD_API_ADDR)\n", name)
	}
	return exitNoAnswer
}
