package serverversion

import (
	"fmt"

	utilversion "k8s.io/apimachinery/pkg/util/version"
)

// The first Kubernetes versions with what leasehold relies on.
var (
	// comparableSince is the first version whose resourceVersions are
	// documented as comparable integers that only grow (KEP-5504, stable
	// in 1.35).
	comparableSince = utilversion.MajorMinor(1, 35)
	// nativeSidecarsSince is the first version with native sidecars: init
	// containers with restartPolicy: Always (beta, on by default, in 1.29).
	nativeSidecarsSince = utilversion.MajorMinor(1, 29)
)

// Assessment is what leasehold concludes from the apiserver's version.
type Assessment struct {
	// GitVersion is the version as the apiserver reports it ("v1.37.2").
	GitVersion string
	// ResourceVersionsComparable is true from Kubernetes 1.35 on: the
	// apiserver promises that resourceVersions are integers that only grow,
	// which makes fencing tokens (each the resourceVersion of the write
	// that started its term) strictly increasing.
	ResourceVersionsComparable bool
	// NativeSidecars is true from Kubernetes 1.29 on.
	NativeSidecars bool
	// Warnings are the log lines the assessment calls for, in order: one
	// for each of the two above that is false.
	Warnings []string
}

// Assess judges gitVersion, the apiserver's version as /version reports it
// (a "v" is optional; pre-release and build suffixes, as in
// "v1.34.2-eks-1234" or "v1.30.0+k3s1", are ignored: they are that minor
// version's). It fails only on a version with no major.minor to compare.
func Assess(gitVersion string) (Assessment, error) {
	v, err := utilversion.ParseGeneric(gitVersion)
	if err != nil {
		return Assessment{}, fmt.Errorf("apiserver version %q: %w", gitVersion, err)
	}
	minor := utilversion.MajorMinor(v.Major(), v.Minor())
	a := Assessment{
		GitVersion:                 gitVersion,
		ResourceVersionsComparable: minor.AtLeast(comparableSince),
		NativeSidecars:             minor.AtLeast(nativeSidecarsSince),
	}
	if !a.ResourceVersionsComparable {
		a.Warnings = append(a.Warnings, fmt.Sprintf("the apiserver (%s) is older than Kubernetes 1.35: it does not promise comparable resourceVersions (KEP-5504). "+
			"A fencing token is the Lease resourceVersion of the write that started its term, so tokens then strictly increase only as long as "+
			"this apiserver serves etcd's revisions as resourceVersions (kube-apiserver over etcd does, but does not promise it); "+
			"leasehold refuses to lead on a resourceVersion that is not a positive integer (docs/compatibility.md)", gitVersion))
	}
	if !a.NativeSidecars {
		a.Warnings = append(a.Warnings, fmt.Sprintf("the apiserver (%s) is older than Kubernetes 1.29: native sidecars (init containers with restartPolicy: Always) are not available, "+
			"so leasehold runs as a plain container that gets SIGTERM with the app: its release on shutdown may race the app's last writes, "+
			"which the fencing token must then protect (examples/manifests/deployment-prestop.yaml)", gitVersion))
	}
	return a, nil
}
