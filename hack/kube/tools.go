//go:build tools

// Package tools pins the main packages this module builds.
package tools

import _ "k8s.io/kubernetes/cmd/kube-apiserver"
