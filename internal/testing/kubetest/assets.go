package kubetest

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

const modulePath = "github.com/leasehold/leasehold"

// assetsDir finds the folder holding the etcd and kube-apiserver binaries:
// explicit, else $LEASEHOLD_KUBE_ASSETS, else <module root>/.cache/kube/current.
func assetsDir(explicit string) (string, error) {
	dir := explicit
	if dir == "" {
		dir = os.Getenv(AssetsEnv)
	}
	if dir == "" {
		root, err := moduleRoot()
		if err != nil {
			return "", err
		}
		dir = filepath.Join(root, ".cache", "kube", "current")
	}
	for _, bin := range []string{"etcd", "kube-apiserver"} {
		if _, err := os.Stat(filepath.Join(dir, bin)); err != nil {
			return "", fmt.Errorf("kubetest: %s not found in %s (run `make kube-bins`, or set %s): %w", bin, dir, AssetsEnv, err)
		}
	}
	return dir, nil
}

// moduleRoot walks up from the working directory to leasehold's go.mod.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if isModuleRoot(filepath.Join(dir, "go.mod")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("kubetest: not inside the " + modulePath + " module")
		}
		dir = parent
	}
}

func isModuleRoot(goMod string) bool {
	f, err := os.Open(goMod)
	if err != nil {
		return false
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if line := strings.TrimSpace(s.Text()); strings.HasPrefix(line, "module ") {
			return strings.TrimSpace(strings.TrimPrefix(line, "module ")) == modulePath
		}
	}
	return false
}

// Kubectl is the path of the kubectl built beside kube-apiserver (make
// kubectl-bin), in the folder the apiserver is found in.
func Kubectl() (string, error) {
	dir, err := assetsDir("")
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "kubectl")
	if _, err := os.Stat(path); err != nil {
		return "", fmt.Errorf("kubetest: kubectl not found in %s (run `make kubectl-bin`): %w", dir, err)
	}
	return path, nil
}
