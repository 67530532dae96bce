// Builds Flux helm-controller v1.5.0 (the version Cozystack ships at 3c780acd)
// from the Go module github.com/fluxcd/helm-controller, whose root package is
// the controller's main. The replaces are the ones its own go.mod declares
// (a dependent module does not inherit them): go-digest with BLAKE3, and
// kustomize pinned to v5.7.1 (api/kyaml v0.20.1). go.sum holds every
// dependency's sum but not the root module's own: the proxy here refuses it
// (403), so build.sh may take its tree from the v1.5.0 tag; see there.
module cozyrender.local/controlplane/helm-controller

go 1.26.0

require github.com/fluxcd/helm-controller v1.5.0

replace github.com/opencontainers/go-digest => github.com/opencontainers/go-digest v1.0.1-0.20231025023718-d50d2fec9c98

replace (
	sigs.k8s.io/kustomize/api => sigs.k8s.io/kustomize/api v0.20.1
	sigs.k8s.io/kustomize/kyaml => sigs.k8s.io/kustomize/kyaml v0.20.1
)
