//go:build tools

// The binary is built with `go build github.com/fluxcd/helm-controller`;
// this import keeps it in the module graph for `go mod tidy`.
package tools

import _ "github.com/fluxcd/helm-controller"
