//go:build tools

// The binaries are built with `go build k8s.io/kubernetes/cmd/<name>`;
// these imports keep them in the module graph for `go mod tidy`.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
