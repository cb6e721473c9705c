package main

import (
	"testing"

	"github.com/leasehold/leasehold/internal/testing/kubetest"
)

// SharedCluster points at the apiserver TestMain (sidecar_test.go, package
// main_test) starts for the tests of both packages; nil, or pointing at
// nil, without one (go test -short).
var SharedCluster **kubetest.Cluster

// sharedCluster returns the shared apiserver, or skips t without one.
func sharedCluster(t testing.TB) *kubetest.Cluster {
	t.Helper()
	if SharedCluster == nil {
		return kubetest.Require(t, nil)
	}
	return kubetest.Require(t, *SharedCluster)
}
