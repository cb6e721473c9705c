package image_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// usedGroups are the Kubernetes API groups the sidecar uses: Leases, and
// Pods for the leader label.
// admissionregistration/v1 holds the types of the objects leasehold
// fencing-policy prints (internal/fencepolicy), on no scheme or client.
var usedGroups = []string{"k8s.io/api/admissionregistration/v1", "k8s.io/api/coordination/v1", "k8s.io/api/core/v1"}

// The binary links only the Kubernetes clients it uses: not client-go's
// full clientset (k8s.io/client-go/kubernetes), none of its generated typed
// clients (their package imports client-go's scheme of every group), and no
// k8s.io/api group but coordination/v1 and core/v1 (internal/kubeclient's
// lean clients, on a scheme of those groups alone) and the fencing
// policy's types.
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

// go.mod keeps the product's direct dependencies apart from those of the
// tests and tools: its first require block lists exactly the modules that
// packages linked into the binary import; the second, the other direct
// dependencies, none of which a linked package imports (`go mod why -m`
// names the shortest importer, often a test or tool; this is the check).
// Nothing under internal/testing is linked.
func TestGoModListsTheProductsDependenciesApart(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	var blocks [][]string // the modules of each require block, // indirect ones left out
	for _, block := range strings.Split(string(data), "require (")[1:] {
		block, _, _ = strings.Cut(block, "\n)")
		var mods []string
		for line := range strings.Lines(block) {
			if f := strings.Fields(line); len(f) >= 2 && !strings.Contains(line, "// indirect") {
				mods = append(mods, f[0])
			}
		}
		blocks = append(blocks, mods)
	}
	if len(blocks) < 2 {
		t.Fatalf("go.mod has %d require blocks; want the product's, then the tests' and tools'", len(blocks))
	}

	cmd := exec.Command("go", "list", "-deps", "-f", `{{.ImportPath}}|{{with .Module}}{{.Path}}|{{.Main}}{{end}}|{{join .Imports " "}}`, "./cmd/sidecar")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps ./cmd/sidecar: %v", err)
	}
	moduleOf := map[string]string{}
	var own [][]string // the linked packages of this module: path, then imports
	for line := range strings.Lines(string(out)) {
		f := strings.Split(strings.TrimSpace(line), "|")
		if len(f) != 4 {
			continue // a standard library package: no module
		}
		moduleOf[f[0]] = f[1]
		if strings.Contains(f[0], "/internal/testing/") {
			t.Errorf("the binary links %s, test infrastructure", f[0])
		}
		if f[2] == "true" {
			own = append(own, append([]string{f[0]}, strings.Fields(f[3])...))
		}
	}
	importers := map[string][]string{} // module → this module's linked packages that import it
	for _, p := range own {
		for _, imp := range p[1:] {
			if m, ok := moduleOf[imp]; ok && m != "github.com/leasehold/leasehold" && !slices.Contains(importers[m], p[0]) {
				importers[m] = append(importers[m], p[0])
			}
		}
	}
	for m := range importers {
		if !slices.Contains(blocks[0], m) {
			t.Errorf("%s is imported by %v, linked into the binary: want it in go.mod's first require block", m, importers[m])
		}
	}
	for _, m := range blocks[0] {
		if importers[m] == nil {
			t.Errorf("go.mod's first require block lists %s, which no package linked into the binary imports: move it to the second", m)
		}
	}
	for _, m := range blocks[1] {
		if importers[m] != nil {
			t.Errorf("go.mod's second require block lists %s, imported by %v, linked into the binary", m, importers[m])
		}
	}
	t.Logf("product: %v; tests and tools only: %v", blocks[0], blocks[1])
}

// apiPackages are the importable packages for apps: the Go client and the
// API's wire types.
var apiPackages = []string{"github.com/leasehold/leasehold/pkg/client", "github.com/leasehold/leasehold/pkg/api"}

// The Go client (pkg/client) and the wire types (pkg/api) link the standard
// library and each other only: an app that imports them pulls in no
// Kubernetes library and nothing of leasehold's server.
func TestClientLinksTheStandardLibraryOnly(t *testing.T) {
	for _, pkg := range apiPackages {
		cmd := exec.Command("go", "list", "-deps", "-f", `{{.ImportPath}} {{.Standard}}`, pkg)
		cmd.Dir = root
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", pkg, err, stderr.Bytes())
		}
		var std, own []string
		for line := range strings.Lines(string(out)) {
			path, standard, _ := strings.Cut(strings.TrimSpace(line), " ")
			switch {
			case standard == "true":
				std = append(std, path)
			case slices.Contains(apiPackages, path):
				own = append(own, path)
			default:
				t.Errorf("%s links %s, which is neither the standard library nor %v", pkg, path, apiPackages)
			}
		}
		t.Logf("go list -deps %s: %d standard library packages, and %v", pkg, len(std), own)
	}
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
