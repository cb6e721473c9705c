package serverversion

import (
	"strings"
	"testing"
)

// TestAssess is the decision's table: which versions warn of what.
func TestAssess(t *testing.T) {
	for _, tc := range []struct {
		version                    string
		comparable, nativeSidecars bool
		warnings                   []string // a substring of each warning, in order
	}{
		{"v1.37.2", true, true, nil},
		{"v1.35.0", true, true, nil},
		{"v1.35.0-alpha.1", true, true, nil},
		{"1.36.1", true, true, nil},
		{"v2.0.0", true, true, nil},
		{"v1.34.3", false, true, []string{"older than Kubernetes 1.35"}},
		{"v1.34.2-eks-1234567", false, true, []string{"older than Kubernetes 1.35"}},
		{"v1.30.0+k3s1", false, true, []string{"older than Kubernetes 1.35"}},
		{"v1.29.0", false, true, []string{"older than Kubernetes 1.35"}},
		{"v1.28.15", false, false, []string{"older than Kubernetes 1.35", "native sidecars"}},
		{"v1.20.0", false, false, []string{"older than Kubernetes 1.35", "native sidecars"}},
	} {
		t.Run(tc.version, func(t *testing.T) {
			a, err := Assess(tc.version)
			if err != nil {
				t.Fatalf("Assess(%q): %v", tc.version, err)
			}
			if a.GitVersion != tc.version || a.ResourceVersionsComparable != tc.comparable || a.NativeSidecars != tc.nativeSidecars {
				t.Errorf("Assess(%q) = %+v, want comparable %v, native sidecars %v", tc.version, a, tc.comparable, tc.nativeSidecars)
			}
			if len(a.Warnings) != len(tc.warnings) {
				t.Fatalf("Assess(%q) warns %q, want %d warnings", tc.version, a.Warnings, len(tc.warnings))
			}
			for i, want := range tc.warnings {
				if !strings.Contains(a.Warnings[i], want) || !strings.Contains(a.Warnings[i], tc.version) {
					t.Errorf("warning %d %q: want it to name %s and say %q", i, a.Warnings[i], tc.version, want)
				}
			}
		})
	}
}

// The warning of an apiserver older than 1.35 says what the fencing token
// then assumes.
func TestComparableWarningSaysWhatTheTokenAssumes(t *testing.T) {
	a, err := Assess("v1.34.0")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"KEP-5504", "resourceVersion of the write that started its term", "strictly increase only as long as", "etcd's revisions"} {
		if !strings.Contains(a.Warnings[0], want) {
			t.Errorf("warning %q does not say %q", a.Warnings[0], want)
		}
	}
}

// A version with no major.minor is an error, never a guess.
func TestAssessRefusesWhatIsNoVersion(t *testing.T) {
	for _, v := range []string{"", "latest", "v1", "abc.def"} {
		if a, err := Assess(v); err == nil {
			t.Errorf("Assess(%q) = %+v, want an error", v, a)
		}
	}
}
