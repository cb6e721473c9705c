package main

import (
	"flag"
	"io"
)

// sidecarCommand is `leasehold sidecar`: the sidecar itself, as with no
// arguments at all.
func sidecarCommand() *command {
	c := &command{
		name:    "sidecar",
		summary: "run the sidecar (the default, with no command)",
		usage:   "leasehold [sidecar]",
	}
	c.help = func(w io.Writer, _ func(string) string) {
		printCommandHelp(w, c, sidecarHelp, nil, sidecarExitStatuses)
	}
	c.run = func(args []string, e *env) int {
		// No flags: a flag set only to recognise -h and --help.
		if status, done := parseFlags(flag.NewFlagSet("leasehold sidecar", flag.ContinueOnError), c, args, e); done {
			return status
		}
		return e.sidecar(e.stderr)
	}
	return c
}

const sidecarHelp = `
Runs the sidecar: it holds the Lease LEASEHOLD_LEASE_NAME on behalf of the
app next to it, and answers on LEASEHOLD_API_ADDR whether this instance leads,
until when and with which fencing token (api/openapi.yaml); /livez, /readyz
and /metrics are on LEASEHOLD_OPS_ADDR. 'leasehold' with no arguments does
the same: the image's ENTRYPOINT, the chart and the manifests start it so.
It takes no flags: it is configured by environment variables (README.md,
"Configuration", has the rules):

  LEASEHOLD_LEASE_NAME                    the Lease's name (required unless LEASEHOLD_LEASES); with SHARDS, their prefix
  LEASEHOLD_LEASES                        a lease group of named roles, comma-separated (default off)
  LEASEHOLD_SHARDS                        a lease group of N shards <LEASE_NAME>-0 … -<N-1> (default off)
  LEASEHOLD_GROUP                         the group's name (default: the shards' LEASE_NAME, or a hash of the roles)
  LEASEHOLD_BALANCE                       share a group's Leases fairly among its members (default true)
  LEASEHOLD_CANDIDATE                     false: an observer, which follows and never campaigns (default true)
  LEASEHOLD_LEASE_NAMESPACE               default $POD_NAMESPACE, else the in-cluster namespace file
  LEASEHOLD_IDENTITY                      default $POD_NAME (else the hostname) + "_" + a random suffix
  LEASEHOLD_LEASE_DURATION                default 15s
  LEASEHOLD_RENEW_DEADLINE                default 10s
  LEASEHOLD_RETRY_PERIOD                  default 2s
  LEASEHOLD_API_ADDR                      default 127.0.0.1:4040
  LEASEHOLD_OPS_ADDR                      default :4041
  LEASEHOLD_MAX_BLOCKING_REQUESTS         blocking requests each listener serves at once (default 300)
  LEASEHOLD_RELEASE_ON_SHUTDOWN           default true
  LEASEHOLD_LOG_LEVEL                     default info (debug, info, warn, error)
  LEASEHOLD_LOG_FORMAT                    default json (json, text)
  LEASEHOLD_APP_HEALTH_URL                health-gated candidacy (default off)
  LEASEHOLD_APP_RANK_URL                  data-aware failover: the app's {"generation","position"}, one Lease (default off)
  LEASEHOLD_APP_HEALTH_TIMEOUT            default 1s
  LEASEHOLD_APP_HEALTH_INTERVAL           default 2s
  LEASEHOLD_APP_HEALTH_FAILURE_THRESHOLD  default 3
  LEASEHOLD_APP_HEALTH_SUCCESS_THRESHOLD  default 1
  LEASEHOLD_POD_LABEL                     the leader label's key (default off)
  LEASEHOLD_FENCING_FLOOR                 publish the new term's token floor on the Lease (default false)
  LEASEHOLD_ADVERTISE_ADDRESS             host:port where other replicas reach this one (default off)
  LEASEHOLD_PROXY_ADDR                    the forwarding proxy's listen address (default off)
  LEASEHOLD_PROXY_UPSTREAM                the local app the proxy forwards to while leading
  LEASEHOLD_HANDOVER                      any, or successor: hand over to the best member (default successor in a balanced group, else any)
  LEASEHOLD_PRIORITY                      this member's priority as a successor (default 0)
  LEASEHOLD_PPROF                         default false
  KUBECONFIG                              used when set; else the in-cluster config`

// sidecarExitStatuses documents the sidecar's exit statuses (run.go).
const sidecarExitStatuses = `Exit status:
  0  stopped by SIGTERM or SIGINT: leadership given up, the Lease released
     (unless LEASEHOLD_RELEASE_ON_SHUTDOWN=false)
  1  any other failure, logged: no kubeconfig or in-cluster config, a listen
     address in use, a server failing
  2  a configuration error (one line on stderr names the variable and the
     rule), or an argument it does not know (the usage on stderr)
`
