#!/bin/sh
# Build Flux helm-controller (the version go.mod requires) into $1/helm-controller
# and copy the CRDs the tests install into $2: HelmRelease from helm-controller;
# ExternalArtifact, HelmChart and OCIRepository from source-controller v1.8.0.
# Everything comes from the Go module proxy at build time; nothing of theirs is
# committed here.
set -eu
BIN=$(cd "$1" && pwd)
mkdir -p "$2" && CRDS=$(cd "$2" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
SOURCE_CONTROLLER=github.com/fluxcd/source-controller@v1.8.0

cd "$HERE"
go build -trimpath -ldflags "-s -w" -o "$BIN/helm-controller" github.com/fluxcd/helm-controller
dir() { go mod download -json "$1" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p'; }
hc=$(dir "$(go list -m -f '{{.Path}}@{{.Version}}' github.com/fluxcd/helm-controller)")
sc=$(dir $SOURCE_CONTROLLER)
# helm-controller watches HelmChart and OCIRepository whatever the releases use.
cp "$hc/config/crd/bases/helm.toolkit.fluxcd.io_helmreleases.yaml" "$CRDS/"
for kind in externalartifacts helmcharts ocirepositories; do
	cp "$sc/config/crd/bases/source.toolkit.fluxcd.io_$kind.yaml" "$CRDS/"
done
cp "$hc/LICENSE" "$CRDS/LICENSE"   # both are Apache-2.0, The Flux authors
chmod -R u+w "$CRDS"
