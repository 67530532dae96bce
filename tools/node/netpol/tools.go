//go:build tools

// kube-network-policies v0.8.0's own command is built with
// `go build sigs.k8s.io/kube-network-policies/cmd`; this import keeps it in the
// module graph for `go mod tidy`.
package tools

import _ "sigs.k8s.io/kube-network-policies/cmd"
