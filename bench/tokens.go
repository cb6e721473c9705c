package main

import (
	"strconv"

	"github.com/leasehold/leasehold/pkg/api"
)

// tokenOf is the fencing token of the term that the write with
// resourceVersion rv acquired, as the API documents it (the acquiring
// write's resourceVersion, a positive decimal integer); false when rv is
// not one.
func tokenOf(rv string) (api.FencingToken, bool) {
	n, err := strconv.ParseUint(rv, 10, 64)
	if err != nil || n == 0 || strconv.FormatUint(n, 10) != rv {
		return 0, false
	}
	return api.FencingToken(n), true
}

// publishedToken is the token the holder published on its Lease
// (api.FencingTokenAnnotation); 0 when there is none or it is malformed.
func publishedToken(annotations map[string]string) api.FencingToken {
	t, _ := tokenOf(annotations[api.FencingTokenAnnotation])
	return t
}
