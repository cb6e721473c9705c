// Package group runs a lease group: several Leases from one sidecar (named
// roles, or the shards <name>-0 … <name>-<N-1>), each a full election of
// package elect with every guarantee of a single Lease, spread fairly over
// the group's live members.
package group
