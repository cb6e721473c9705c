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

// typedClients are client-go's typed clients of the used groups.
var typedClients = []string{"k8s.io/client-go/kubernetes/typed/coordination/v1", "k8s.io/client-go/kubernetes/typed/core/v1"}

// The binary links only the Kubernetes clients it uses: not the full
// clientset (k8s.io/client-go/kubernetes, with every group's typed client),
// no typed client but those of coordination/v1 and core/v1, and no
// k8s.io/api group but coordination/v1 and core/v1 other than through those
// two typed clients, which import client-go's scheme of every group (and
// core/v1's the groups of its subresources). That way in remains while the
// typed clients are linked (internal/elect takes client-go's typed
// LeasesGetter); once they are not, the test holds with no group but the
// two.
func TestBinaryLinksOnlyTheClientsItUses(t *testing.T) {
	const main = "github.com/leasehold/leasehold/cmd/sidecar"
	deps := goListDeps(t, "./cmd/sidecar")
	if _, ok := deps["k8s.io/client-go/kubernetes"]; ok {
		t.Errorf("k8s.io/client-go/kubernetes (the full clientset) is linked, imported by %v", importersOf(deps, "k8s.io/client-go/kubernetes"))
	}
	groups := 0
	for pkg := range deps {
		if typed, ok := strings.CutPrefix(pkg, "k8s.io/client-go/kubernetes/typed/"); ok && !slices.Contains(usedGroups, "k8s.io/api/"+typed) {
			t.Errorf("%s (a typed client the sidecar does not use) is linked, imported by %v", pkg, importersOf(deps, pkg))
		}
		if strings.HasPrefix(pkg, "k8s.io/api/") {
			groups++
		}
	}
	// Every path to another group passes through a typed client.
	for pkg, path := range reachable(deps, main, typedClients) {
		if strings.HasPrefix(pkg, "k8s.io/api/") && !slices.Contains(usedGroups, pkg) {
			t.Errorf("%s (an API group the sidecar does not use) is linked, not through a typed client: %s", pkg, strings.Join(path, " → "))
		}
	}
	t.Logf("%d k8s.io/api groups linked; besides %v, only through %v", groups, usedGroups, typedClients)
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

// reachable returns the packages reachable from root in deps without going
// through any package of stop, each with one import path leading to it.
func reachable(deps map[string][]string, root string, stop []string) map[string][]string {
	paths := map[string][]string{root: {root}}
	queue := []string{root}
	for len(queue) > 0 {
		pkg := queue[0]
		queue = queue[1:]
		for _, imp := range deps[pkg] {
			if _, seen := paths[imp]; seen || slices.Contains(stop, imp) {
				continue
			}
			paths[imp] = append(slices.Clone(paths[pkg]), imp)
			queue = append(queue, imp)
		}
	}
	return paths
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
