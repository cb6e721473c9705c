package image_test

import (
	"bytes"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// usedGroups are the Kubernetes API groups the sidecar uses: Leases, and
// Pods for the leader label.
var usedGroups = []string{"k8s.io/api/coordination/v1", "k8s.io/api/core/v1"}

// The binary links only the Kubernetes clients it uses: not client-go's
// full clientset (k8s.io/client-go/kubernetes), none of its generated typed
// clients (their package imports client-go's scheme of every group), and no
// k8s.io/api group but coordination/v1 and core/v1 (internal/kubeclient's
// lean clients, on a scheme of those groups alone).
func TestBinaryLinksOnlyTheClientsItUses(t *testing.T) {
	deps := goListDeps(t, "./cmd/sidecar")
	var groups []string
	for pkg := range deps {
		switch {
		case pkg == "k8s.io/client-go/kubernetes", strings.HasPrefix(pkg, "k8s.io/client-go/kubernetes/"):
			t.Errorf("%s is linked, imported by %v", pkg, importersOf(deps, pkg))
		case strings.HasPrefix(pkg, "k8s.io/api/"):
			groups = append(groups, pkg)
			if !slices.Contains(usedGroups, pkg) {
				t.Errorf("%s (an API group the sidecar does not use) is linked, imported by %v", pkg, importersOf(deps, pkg))
			}
		}
	}
	slices.Sort(groups)
	t.Logf("%d packages linked; k8s.io/api groups: %v", len(deps), groups)
}

// goListDeps returns every package of pkg's graph for the Dockerfile's
// build (CGO_ENABLED=0) with the packages it imports.
func goListDeps(t *testing.T, pkg string) map[string][]string {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, pkg)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v\n%s", pkg, err, stderr.Bytes())
	}
	deps := map[string][]string{}
	for line := range strings.Lines(string(out)) {
		fields := strings.Fields(line)
		if len(fields) > 0 {
			deps[fields[0]] = fields[1:]
		}
	}
	return deps
}

// importersOf lists the packages of deps that import pkg, sorted.
func importersOf(deps map[string][]string, pkg string) []string {
	var importers []string
	for p, imports := range deps {
		if slices.Contains(imports, pkg) {
			importers = append(importers, p)
		}
	}
	slices.Sort(importers)
	return importers
}
