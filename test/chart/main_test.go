// Package chart_test proves the Helm chart charts/leasehold against a real
// kube-apiserver: it lints and renders the chart with every ci/*-values.yaml,
// applies every rendered object with server-side dry-run (real schemas, strict
// field validation, Pod Security admission), installs it with helm, and runs
// the real sidecar with exactly the chart's Role to show that the Role is
// sufficient and that none of its rules is surplus. The monitoring objects
// are dry-run against the Prometheus Operator's CRDs (installed from its Go
// module), the alerts unit-tested with promtool, and the dashboard and the
// alerts checked against what a real sidecar exports (monitoring_test.go).
//
// helm is built by `make helm-bin` and found through $LEASEHOLD_HELM, else
// <module root>/.cache/helm/current/helm; promtool by `make promtool-bin`,
// through $LEASEHOLD_PROMTOOL, else <module root>/.cache/promtool/current/promtool.
package chart_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/leasehold/leasehold/internal/testing/fleet"
	"github.com/leasehold/leasehold/internal/testing/kubetest"
)

// HelmEnv names the environment variable that points at the helm binary.
const HelmEnv = "LEASEHOLD_HELM"

var (
	cluster  *kubetest.Cluster
	sidecar  string // the sidecar binary, built with the Dockerfile's flags
	helmBin  string // "" when helm is missing (only allowed with -short)
	helmHome string // HELM_*_HOME for every helm run: never the user's
	root     string // the module root
	chartDir string // <root>/charts/leasehold
)

func TestMain(m *testing.M) { os.Exit(testMain(m)) }

func testMain(m *testing.M) int {
	flag.Parse() // for testing.Short; kubetest.Main parses again, harmlessly
	var err error
	if root, err = filepath.Abs(filepath.Join("..", "..")); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	chartDir = filepath.Join(root, "charts", "leasehold")
	helmBin = os.Getenv(HelmEnv)
	if helmBin == "" {
		helmBin = filepath.Join(root, ".cache", "helm", "current", "helm")
	}
	if _, err := os.Stat(helmBin); err != nil {
		helmBin = ""
		// -short runs no integration test; otherwise a missing helm fails the package.
		if !testing.Short() {
			fmt.Fprintf(os.Stderr, "helm not found (run `make helm-bin`, or set %s): %v\n", HelmEnv, err)
			return 1
		}
	}
	tmp, err := os.MkdirTemp("", "leasehold-chart-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(tmp)
	helmHome = filepath.Join(tmp, "helm")
	if !testing.Short() {
		if sidecar, err = fleet.Build(context.Background(), tmp); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	return kubetest.Main(m, &cluster)
}

// requireHelm skips t without helm, which only -short allows.
func requireHelm(t testing.TB) {
	t.Helper()
	if helmBin == "" {
		t.Skip("needs helm (make helm-bin)")
	}
}

// helm runs the helm binary with a private home and returns its stdout; on a
// non-zero exit the error carries stderr.
func helm(t testing.TB, args ...string) (string, error) {
	t.Helper()
	requireHelm(t)
	cmd := exec.CommandContext(t.Context(), helmBin, args...)
	cmd.Env = append(os.Environ(),
		"HELM_CACHE_HOME="+filepath.Join(helmHome, "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(helmHome, "config"),
		"HELM_DATA_HOME="+filepath.Join(helmHome, "data"),
		"KUBECONFIG=/nonexistent", // only an explicit --kubeconfig reaches a cluster
	)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("helm %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), nil
}

// mustHelm is helm that fails t on error.
func mustHelm(t testing.TB, args ...string) string {
	t.Helper()
	out, err := helm(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// ciValues lists the chart's ci/*-values.yaml files.
func ciValues(t testing.TB) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(chartDir, "ci", "*-values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 3 {
		t.Fatalf("want several ci/*-values.yaml files, found %v", files)
	}
	return files
}

// exampleChart copies the worked example of a user's chart to a temporary
// folder with leasehold vendored as its dependency (what `helm dependency
// update` does), and returns its path.
func exampleChart(t testing.TB) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "my-app")
	if err := os.CopyFS(dir, os.DirFS(filepath.Join(chartDir, "examples", "my-app"))); err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(filepath.Join(dir, "charts", "leasehold"), os.DirFS(chartDir)); err != nil {
		t.Fatal(err)
	}
	return dir
}

// render runs helm template and returns the objects, in order.
func render(t testing.TB, release, namespace, chart string, args ...string) []*unstructured.Unstructured {
	t.Helper()
	out := mustHelm(t, append([]string{"template", release, chart, "--namespace", namespace}, args...)...)
	objs, err := decode(out)
	if err != nil {
		t.Fatalf("helm template output: %v", err)
	}
	return objs
}

// decode splits a multi-document YAML stream into objects, skipping empty
// documents.
func decode(manifest string) ([]*unstructured.Unstructured, error) {
	reader := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(manifest)))
	var objs []*unstructured.Unstructured
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, err
		}
		var m map[string]any
		if err := yaml.Unmarshal(doc, &m); err != nil {
			return nil, fmt.Errorf("%w in:\n%s", err, doc)
		}
		if len(m) == 0 {
			continue
		}
		objs = append(objs, &unstructured.Unstructured{Object: m})
	}
}

// only returns the objects of kind.
func only(objs []*unstructured.Unstructured, kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == kind {
			out = append(out, o)
		}
	}
	return out
}

// one returns the single object of kind, failing t unless there is exactly one.
func one(t testing.TB, objs []*unstructured.Unstructured, kind string) *unstructured.Unstructured {
	t.Helper()
	found := only(objs, kind)
	if len(found) != 1 {
		t.Fatalf("rendered %d objects of kind %s, want 1", len(found), kind)
	}
	return found[0]
}

// convert turns a rendered object into its typed form.
func convert[T any](t testing.TB, obj *unstructured.Unstructured) *T {
	t.Helper()
	var typed T
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(obj.Object, &typed, true); err != nil {
		t.Fatalf("%s %s: %v", obj.GetKind(), obj.GetName(), err)
	}
	return &typed
}

// container finds a container by name.
func container(containers []corev1.Container, name string) *corev1.Container {
	for i := range containers {
		if containers[i].Name == name {
			return &containers[i]
		}
	}
	return nil
}

// envValue is the literal value of the environment variable name, and
// whether it is set.
func envValue(c *corev1.Container, name string) (string, bool) {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value, true
		}
	}
	return "", false
}

// newNamespace creates a namespace in which Pod Security admission enforces
// and warns about the "restricted" standard.
func newNamespace(t testing.TB, prefix string) string {
	t.Helper()
	kubetest.Require(t, cluster)
	ns, err := cluster.Clientset().CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-", Labels: map[string]string{
			"pod-security.kubernetes.io/enforce":         "restricted",
			"pod-security.kubernetes.io/enforce-version": "latest",
			"pod-security.kubernetes.io/warn":            "restricted",
			"pod-security.kubernetes.io/warn-version":    "latest",
		}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return ns.Name
}
