package main_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/leasehold/leasehold/internal/kubeclient"
	"github.com/leasehold/leasehold/internal/testing/kubetest"
	"github.com/leasehold/leasehold/pkg/api"
)

// The sidecar reads the apiserver's version at start: the test apiserver
// (1.37) promises comparable resourceVersions and has native sidecars, so
// the sidecar logs the version and no warning, and reports it in its
// status and metrics.
func TestStartReportsTheAPIServerVersion(t *testing.T) {
	want, err := kubetest.Require(t, cluster).Clientset().Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	in, _ := startLeader(t, newFleet(t), "a")
	var st api.Status
	eventually(t, "apiserverVersion in the status", func() bool {
		st, err = in.Status(t.Context())
		return err == nil && st.ApiserverVersion != nil
	}, func() string { return fmt.Sprintf("status %+v, err %v", st, err) })
	if got := *st.ApiserverVersion; got != (api.ApiserverVersion{GitVersion: want.GitVersion, ResourceVersionsComparable: true, NativeSidecars: true}) {
		t.Errorf("status apiserverVersion %+v, want %s, comparable resourceVersions and native sidecars", got, want.GitVersion)
	}
	m, err := in.Metrics(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Sum("leasehold_apiserver_info", map[string]string{"git_version": want.GitVersion, "lease": "app"}); got != 1 {
		t.Errorf("leasehold_apiserver_info{git_version=%q} = %v, want 1", want.GitVersion, got)
	}
	if got := m.Sum("leasehold_apiserver_resource_versions_comparable", map[string]string{"lease": "app"}); got != 1 {
		t.Errorf("leasehold_apiserver_resource_versions_comparable = %v, want 1", got)
	}
	log := logOf(t, in)
	if !bytes.Contains(log, []byte(`"msg":"apiserver version","gitVersion":"`+want.GitVersion+`"`)) {
		t.Errorf("the log does not name the apiserver's version %s:\n%s", want.GitVersion, log)
	}
	for _, warning := range []string{"older than Kubernetes", "could not read the apiserver's version"} {
		if bytes.Contains(log, []byte(warning)) {
			t.Errorf("the log warns %q of a %s apiserver:\n%s", warning, want.GitVersion, log)
		}
	}
}

// /version is readable by a user RBAC grants nothing (Kubernetes' default
// ClusterRole system:public-info-viewer), so the chart's Roles need no
// rule for it.
func TestAnyUserReadsTheAPIServerVersion(t *testing.T) {
	c := kubetest.Require(t, cluster)
	nobody, err := c.User("nobody")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), generous)
	defer cancel()
	info, err := kubeclient.ServerVersion(ctx, nobody.Config)
	if err != nil {
		t.Fatalf("a user with no role reads /version: %v", err)
	}
	want, err := c.Clientset().Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	if info.GitVersion != want.GitVersion {
		t.Errorf("ServerVersion = %q, want %q", info.GitVersion, want.GitVersion)
	}
}
