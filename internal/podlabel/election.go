package podlabel

import (
	"crypto/sha256"
	"encoding/hex"

	"k8s.io/apimachinery/pkg/util/validation"
)

// LeaseKey is the election label: every Labeler writes it on its own Pod,
// in the same patch as the leader label, with a value naming its Lease
// (see leaseValue). A leader's cleanup selects <Key>=true together with
// LeaseKey=<its value>, so it never touches the Pods of another election,
// such as another app's in the same namespace.
const LeaseKey = "leasehold.io/lease"

// hashPrefix and hashDigits make the hashed form of an election label
// value: hashPrefix, then the first hashDigits hex digits of a SHA-256.
const (
	hashPrefix = "sha256_"
	hashDigits = 32
)

// leaseValue is the value of LeaseKey on the Pods in podNamespace of the
// election of the Lease leaseNamespace/leaseName. It is unique among the
// elections whose Pods share podNamespace, and the same for every Pod of one
// election there:
//
//   - leaseName, when the Lease lives in podNamespace;
//   - leaseNamespace + "_" + leaseName, when it lives elsewhere (Lease names
//     and namespaces never contain "_", so neither form can be mistaken for
//     the other);
//   - when that is no valid label value (longer than 63 characters: a Lease
//     name may have up to 253), "sha256_" followed by the first 32 hex
//     digits of the SHA-256 of leaseNamespace + "/" + leaseName: unique
//     as far as 128 bits of SHA-256 are (another election would need a
//     Lease whose digest, or whose name in a namespace "sha256", matches
//     those 32 digits).
//
// Lease names and namespaces are lower-case alphanumerics, '-' and '.',
// beginning and ending with an alphanumeric, so the first two forms are
// valid label values whenever they are short enough.
func leaseValue(leaseNamespace, leaseName, podNamespace string) string {
	v := leaseName
	if leaseNamespace != podNamespace {
		v = leaseNamespace + "_" + leaseName
	}
	if len(validation.IsValidLabelValue(v)) == 0 {
		return v
	}
	sum := sha256.Sum256([]byte(leaseNamespace + "/" + leaseName))
	return hashPrefix + hex.EncodeToString(sum[:])[:hashDigits]
}
