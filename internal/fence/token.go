package fence

import (
	"fmt"
	"strconv"

	"github.com/leasehold/leasehold/pkg/api"
)

// Annotation is the Lease annotation on which the holder publishes its
// term's token, so that every instance and kubectl can read it. The write
// that acquires a term removes it; the holder's next write publishes it.
const Annotation = api.FencingTokenAnnotation

// Token is a fencing token. Tokens of later terms are larger. The zero Token
// means "no token known" and is never the token of a term. It is the API's
// api.FencingToken (a JSON number; String formats it in decimal, as the
// resourceVersion it came from): the token the election derives is the one
// the API answers, with no conversion between them.
type Token = api.FencingToken

// FromResourceVersion converts the resourceVersion returned by an acquiring
// write into that term's token. It accepts exactly the well-formed
// resourceVersions of KEP-5504 (a positive decimal integer without leading
// zeros) that fit in 64 bits.
func FromResourceVersion(rv string) (Token, error) {
	n, err := strconv.ParseUint(rv, 10, 64)
	if err != nil || n == 0 || strconv.FormatUint(n, 10) != rv {
		return 0, fmt.Errorf("fence: resourceVersion %q is not a positive integer; fencing needs comparable resourceVersions (Kubernetes ≥ 1.35, KEP-5504)", rv)
	}
	return Token(n), nil
}

// Published reads the token a holder published on its Lease. It returns
// false when the annotation is absent or malformed. A published token is
// only a claim made by whoever last wrote the Lease; see Credible for the
// checks an instance applies before repeating it.
func Published(annotations map[string]string) (Token, bool) {
	v, ok := annotations[Annotation]
	if !ok {
		return 0, false
	}
	t, err := FromResourceVersion(v)
	return t, err == nil
}

// Credible reports whether a token published on a Lease can be the current
// term's, given the resourceVersion the Lease has now (leaseRV).
//
// A genuine published token is the resourceVersion of the write that
// acquired the term, and it is published by a later write, so it is smaller
// than the Lease's own resourceVersion; a larger value was made up by hand.
// A credible token can still be older than one an instance reported before:
// keeping reported tokens from going backwards, as apps are promised, is
// the reporter's job.
func Credible(published, leaseRV Token) bool {
	return published < leaseRV
}
