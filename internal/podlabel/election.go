package podlabel

import (
	"crypto/sha256"
	"encoding/hex"

	"k8s.io/apimachinery/pkg/util/validation"
)

// LeaseKey is the election label of a single Lease: its Labeler writes it
// on its own Pod, in the same patch as the leader label, with a value
// naming its Lease (see electionValue). A leader's cleanup selects
// <Key>=true together with LeaseKey=<its value>, so it never touches the
// Pods of another election, such as another app's in the same namespace.
const LeaseKey = "leasehold.io/lease"

// GroupKey is the election label of a lease group: each Labeler of a
// group (one per Lease) writes it on its own Pod, in the same patch as its
// Lease's leader label, with a value naming the group (see electionValue).
// The cleanup of a Lease of the group selects that Lease's leader label
// (GroupLeaderKey) =true together with GroupKey=<the group's value>, so it
// touches neither the Pods of another group nor those of a single Lease,
// which carry no GroupKey. One key for the whole group, rather than one per
// Lease, keeps the labels a Pod carries at one per Lease plus one.
const GroupKey = "leasehold.io/group"

// GroupLeaderKey is the leader label's key for the Lease lease of a lease
// group whose label key (LEASEHOLD_POD_LABEL) is key: key + "-" + lease,
// e.g. leasehold.io/leader-alpha. Distinct Leases give distinct keys, and
// none is LeaseKey or GroupKey (whose names have no '-'); each must still
// be a qualified label name, which Config.Validate checks (its name part
// has at most 63 characters).
func GroupLeaderKey(key, lease string) string { return key + "-" + lease }

// hashPrefix and hashDigits make the hashed form of an election label
// value: hashPrefix, then the first hashDigits hex digits of a SHA-256.
const (
	hashPrefix = "sha256_"
	hashDigits = 32
)

// electionValue is the value of the election label on the Pods in
// podNamespace of an election: of LeaseKey for the single Lease
// namespace/name, of GroupKey for the lease group name whose Leases live in
// namespace. It is unique among the elections of its kind whose Pods share
// podNamespace (a group's name is unique in its Leases' namespace, as its
// member Leases are named after it), and the same for every Pod of one
// election there:
//
//   - name, when the election's Leases live in podNamespace;
//   - namespace + "_" + name, when they live elsewhere (Lease and group
//     names and namespaces never contain "_", so neither form can be
//     mistaken for the other);
//   - when that is no valid label value (longer than 63 characters: a Lease
//     name may have up to 253), "sha256_" followed by the first 32 hex
//     digits of the SHA-256 of namespace + "/" + name: unique as far as
//     128 bits of SHA-256 are (another election would need a name whose
//     digest, or whose name in a namespace "sha256", matches those 32
//     digits).
//
// Lease and group names and namespaces are lower-case alphanumerics, '-'
// and '.', beginning and ending with an alphanumeric, so the first two
// forms are valid label values whenever they are short enough.
func electionValue(namespace, name, podNamespace string) string {
	v := name
	if namespace != podNamespace {
		v = namespace + "_" + name
	}
	if len(validation.IsValidLabelValue(v)) == 0 {
		return v
	}
	sum := sha256.Sum256([]byte(namespace + "/" + name))
	return hashPrefix + hex.EncodeToString(sum[:])[:hashDigits]
}
