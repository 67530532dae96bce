#!/bin/sh
# Build Flux helm-controller v1.5.0 into $1/helm-controller and copy the CRDs
# the tests install (HelmRelease from helm-controller; ExternalArtifact,
# HelmChart and OCIRepository from source-controller v1.8.0) into $2, both taken from the upstream modules at
# build time (nothing of theirs is committed here).
#
# Source of github.com/fluxcd/helm-controller@v1.5.0:
#   1. the Go module proxy (`go mod download`), the ordinary way;
#   2. when the proxy refuses it (proxy.golang.org answers 403 "This module
#      version is not available" for the root module on the machine this was
#      written on, while its /api module and source-controller are served), a
#      Git clone named by HELM_CONTROLLER_GIT: the tag v1.5.0 must be the
#      commit pinned below, and its tree is the module's content. It is used
#      through a go.work replace, so the build is the same module graph.
set -eu
BIN=$(cd "$1" && pwd)
mkdir -p "$2" && CRDS=$(cd "$2" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
VERSION=v1.5.0
COMMIT=c6187842591276f45cbca7adf3e3a5aa5d233328   # the commit fluxcd/helm-controller tag v1.5.0 points at
SOURCE_CONTROLLER=github.com/fluxcd/source-controller@v1.8.0
WORK=$(cd "$(dirname "$CRDS")" && pwd)/helm-controller-src

cd "$HERE"
if dir=$(go mod download -json github.com/fluxcd/helm-controller@$VERSION 2>/dev/null \
         | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p') && [ -n "$dir" ]; then
	SRC=$dir
	GOFLAGS="${GOFLAGS:-} -mod=mod" go build -o "$BIN/helm-controller" github.com/fluxcd/helm-controller
else
	GIT=${HELM_CONTROLLER_GIT:-}
	if [ -z "$GIT" ] && [ -d /work/.mirror/fluxcd+helm-controller/repo ]; then
		GIT=/work/.mirror/fluxcd+helm-controller/repo
	fi
	if [ -z "$GIT" ]; then
		echo "build.sh: the Go proxy refuses github.com/fluxcd/helm-controller@$VERSION;" \
		     "set HELM_CONTROLLER_GIT to a clone of github.com/fluxcd/helm-controller" >&2
		exit 2
	fi
	got=$(git -C "$GIT" rev-parse "$VERSION^{commit}")
	if [ "$got" != "$COMMIT" ]; then
		echo "build.sh: $GIT: tag $VERSION is $got, expected $COMMIT" >&2
		exit 2
	fi
	SRC=$WORK/helm-controller@$VERSION
	rm -rf "$WORK" && mkdir -p "$SRC"
	git -C "$GIT" archive "$COMMIT" | tar -x -C "$SRC"
	cat > "$WORK/go.work" <<WORK
go 1.26.0

use $HERE

replace github.com/fluxcd/helm-controller $VERSION => $SRC
WORK
	cp "$HERE/go.sum" "$WORK/go.work.sum"
	GOWORK=$WORK/go.work go build -o "$BIN/helm-controller" github.com/fluxcd/helm-controller
fi

sc=$(go mod download -json $SOURCE_CONTROLLER | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
mkdir -p "$CRDS"
# helm-controller watches HelmChart and OCIRepository whatever the releases use.
cp "$SRC/config/crd/bases/helm.toolkit.fluxcd.io_helmreleases.yaml" "$CRDS/"
for kind in externalartifacts helmcharts ocirepositories; do
	cp "$sc/config/crd/bases/source.toolkit.fluxcd.io_$kind.yaml" "$CRDS/"
done
cp "$SRC/LICENSE" "$CRDS/LICENSE"   # both are Apache-2.0, The Flux authors
chmod -R u+w "$CRDS"
