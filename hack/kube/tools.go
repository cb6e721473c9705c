//go:build tools

// Package tools pins the main packages this module builds: kube-apiserver
// (with ./etcd, the test harness's control plane), and the rest of a
// single node (make node): the controller manager, the scheduler, the
// kubelet, kube-proxy and kubectl.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
