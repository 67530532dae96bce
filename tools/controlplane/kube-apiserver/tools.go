//go:build tools

// The binary is built with `go build k8s.io/kubernetes/cmd/kube-apiserver`;
// this import keeps it in the module graph for `go mod tidy`.
package tools

import _ "k8s.io/kubernetes/cmd/kube-apiserver"
