# Two commands on a fresh machine: `make demo` and `make test`.
# Each creates its own virtualenv (.venv) and installs what it needs.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
BIN    := .cache/bin

# The pinned binaries the tests, the benchmarks and the Helm examples use.
export COZYRENDER_HELM3   := $(abspath $(BIN)/helm3)
export COZYRENDER_HELM4   := $(abspath $(BIN)/helm4)
export COZYRENDER_KUBECTL := $(abspath $(BIN)/kubectl)

# Wheels of cozyrender's dependencies, for the wheel test's offline install into a fresh venv.
WHEELHOUSE := $(VENV)/wheelhouse
DIST       := dist
# Helm's own state for `make dist`, kept out of the user's home.
HELM_TMP   := $(abspath build/helm-home)

.PHONY: venv binaries controlplane aggapi flux-controllers cluster cluster-down cluster-injection-on cluster-injection-off wheelhouse chromium prometheus screenshot demo test test-fast bench dist clean image node-packages node certmanager FORCE

venv: $(VENV)/.installed
$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test,bench,docs]' --config-settings editable_mode=compat
	touch $@

binaries: $(BIN)/.fetched
$(BIN)/.fetched: tools/fetch_binaries.py | $(VENV)/.installed
	$(PY) tools/fetch_binaries.py $(BIN)
	touch $@

# Build once (tools/cached_build.py): each Go binary is rebuilt only when the digest of its inputs
# (its Go module's files, the build command, the Go version) changed, never for a file's
# timestamp (a fresh clone's are all new). What is built is also kept in BUILD_STORE by that
# digest, so another clone on this machine (CI's, a worktree's) copies it instead of building it
# again, only for identical inputs; `make BUILD_STORE=` keeps nothing outside the clone.
BUILD_STORE ?= $(HOME)/.cache/cozyrender-build
CACHED_BUILD = $(PYTHON) tools/cached_build.py $(notdir $@) --store "$(BUILD_STORE)" --key "$$(go env GOVERSION)" --out $@

# The test control plane, built from Go modules (tools/controlplane/*/go.mod) and reused once
# built: kube-apiserver and kube-controller-manager v1.35.4 (k8s.io/kubernetes, staging modules
# pinned to v0.35.4) and etcd v3.6 (go.etcd.io/etcd/server/v3). Measured on 2 cores with the
# modules downloaded: kube-apiserver 3 min 20 s, then kube-controller-manager 1 min 40 s (shared
# packages cached), etcd 25 s; Go's build cache makes a rebuild seconds.
GO_LDFLAGS := -s -w
KUBE_VERSION_LDFLAGS := -X k8s.io/component-base/version.gitVersion=v1.35.4 \
  -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=35
controlplane: $(BIN)/kube-apiserver $(BIN)/kube-controller-manager $(BIN)/etcd
$(BIN)/kube-apiserver $(BIN)/kube-controller-manager: $(BIN)/%: FORCE
	@mkdir -p $(BIN)
	@$(CACHED_BUILD) --in tools/controlplane/kubernetes -- 'cd tools/controlplane/kubernetes && go build -trimpath \
	  -ldflags "$(GO_LDFLAGS) $(KUBE_VERSION_LDFLAGS)" -o $(abspath $@) k8s.io/kubernetes/cmd/$*'
$(BIN)/etcd: FORCE
	@mkdir -p $(BIN)
	@$(CACHED_BUILD) --in tools/controlplane/etcd -- \
	  'cd tools/controlplane/etcd && go build -trimpath -ldflags "$(GO_LDFLAGS)" -o $(abspath $@) .'

# The test node's binaries: kubelet and kube-scheduler v1.35.4 from the same k8s.io/kubernetes
# module as kube-apiserver (tools/controlplane/kubernetes), and the GPU device plugin
# (tools/node/deviceplugin, on k8s.io/kubelet's deviceplugin v1beta1 API) and the DRA driver
# gpu.cozyrender.io (tools/node/draplugin, on k8s.io/dynamic-resource-allocation v0.35.4's
# kubeletplugin, the same k8s.io module versions). Measured on the shared 2 cores with the
# modules and the apiserver's packages cached: kubelet 1 min 55 s, kube-scheduler 26 s, device
# plugin 10 s, DRA driver 5 s (alone: 2 min 22 s with an empty build cache, 3 min 51 s
# from nothing, its modules downloaded too).
node: $(BIN)/kubelet $(BIN)/kube-scheduler $(BIN)/cozyrender-deviceplugin $(BIN)/cozyrender-draplugin $(BIN)/cozyrender-k8s-sd \
  $(BIN)/kube-network-policies node-packages
$(BIN)/kubelet $(BIN)/kube-scheduler: $(BIN)/%: FORCE
	@mkdir -p $(BIN)
	@$(CACHED_BUILD) --in tools/controlplane/kubernetes -- 'cd tools/controlplane/kubernetes && go build -trimpath \
	  -ldflags "$(GO_LDFLAGS) $(KUBE_VERSION_LDFLAGS)" -o $(abspath $@) k8s.io/kubernetes/cmd/$*'
$(BIN)/cozyrender-deviceplugin: FORCE
	@mkdir -p $(BIN)
	@$(CACHED_BUILD) --in tools/node/deviceplugin -- \
	  'cd tools/node/deviceplugin && go build -trimpath -ldflags "$(GO_LDFLAGS)" -o $(abspath $@) .'
$(BIN)/cozyrender-draplugin: FORCE
	@mkdir -p $(BIN)
	@$(CACHED_BUILD) --in tools/node/draplugin -- \
	  'cd tools/node/draplugin && go build -trimpath -ldflags "$(GO_LDFLAGS)" -o $(abspath $@) .'
# Prometheus' own Kubernetes service discovery (github.com/prometheus/prometheus v0.311.0's
# discovery/kubernetes) served as HTTP SD, for Debian's prometheus, built without it
# (tools/k8ssd; tests/test_node_controller.py scrapes the chart's pods through it). Pinned to
# the k8s.io modules the other tools build (v0.35.4), so their packages come from the Go build
# cache: 1 min 30 s after them (3 min 55 s with v0.316.0's client-go v0.37, shared with nothing).
$(BIN)/cozyrender-k8s-sd: FORCE
	@mkdir -p $(BIN)
	@$(CACHED_BUILD) --in tools/k8ssd -- \
	  'cd tools/k8ssd && go build -trimpath -ldflags "$(GO_LDFLAGS)" -o $(abspath $@) .'

# The node's NetworkPolicy enforcer: sigs.k8s.io/kube-network-policies v0.8.0's own command
# (tools/node/netpol; nftables and NFQUEUE through netlink, no nft userspace; node.py adds one
# iptables rule, see its docstring), its k8s.io modules pinned to v0.35.4 as the other tools'.
# Measured on the shared 2 cores beside another Go build: modules 3 s, the build 3 min 21 s
# (its k8s.io packages are built anew: its other dependencies' versions differ); 53 MiB.
$(BIN)/kube-network-policies: FORCE
	@mkdir -p $(BIN)
	@$(CACHED_BUILD) --in tools/node/netpol -- 'cd tools/node/netpol && go build -trimpath \
	  -ldflags "$(GO_LDFLAGS)" -o $(abspath $@) sigs.k8s.io/kube-network-policies/cmd'

# cert-manager v1.21.2's controller and cainjector (tools/certmanager): the Go module proxy serves
# the library module github.com/cert-manager/cert-manager but not its command modules
# (.../cmd/controller, .../cmd/cainjector: 404), so two small commands of ours wire the library's
# controllers (self-signed and CA issuers only: no ACME, no DNS). Their images
# dist/cert-manager-{controller,cainjector}-image{/,.tar} (tools/image/build.py cert-manager), and
# the CRDs from the module's deploy/crds (Apache-2.0), copied out of the Go module cache into
# .cache/cert-manager-crds. Measured on the shared 2 cores: module download about 5 s (377 MB),
# the controller 3 min 10 s with an empty Go build cache (2 min 27 s beside the control plane's),
# the cainjector 8 s more, both images 3 s; tests/test_node_certmanager.py 2 min 15 s.
CERT_MANAGER_CRDS := .cache/cert-manager-crds
CERT_MANAGER_GO := tools/certmanager/go.mod tools/certmanager/go.sum
certmanager: $(BIN)/cert-manager-controller $(BIN)/cert-manager-cainjector $(CERT_MANAGER_CRDS)/.copied \
  $(DIST)/cert-manager-controller-image/index.json
$(BIN)/cert-manager-controller $(BIN)/cert-manager-cainjector: $(BIN)/cert-manager-%: FORCE
	@mkdir -p $(BIN)
	@$(CACHED_BUILD) --in $(CERT_MANAGER_GO) tools/certmanager/$* -- \
	  'cd tools/certmanager && CGO_ENABLED=0 go build -trimpath -ldflags "$(GO_LDFLAGS) -buildid=" -o $(abspath $@) ./$*'
$(CERT_MANAGER_CRDS)/.copied: $(CERT_MANAGER_GO)
	rm -rf $(CERT_MANAGER_CRDS) && mkdir -p $(CERT_MANAGER_CRDS)
	cd tools/certmanager && dir=$$(go list -m -f '{{.Dir}}' github.com/cert-manager/cert-manager) && \
	  cp "$$dir"/deploy/crds/cert-manager.io_*.yaml "$$dir"/LICENSE $(abspath $(CERT_MANAGER_CRDS))/
	chmod u+w $(CERT_MANAGER_CRDS)/*
	touch $@
$(DIST)/cert-manager-controller-image/index.json: $(BIN)/cert-manager-controller $(BIN)/cert-manager-cainjector tools/image/build.py build/image-revision | $(VENV)/.installed
	$(PY) tools/image/build.py cert-manager --out $(DIST) --bin $(BIN)

# cozyrender's stand-in for cozystack-api (tools/aggapi): an aggregated API server on
# k8s.io/apiserver v0.35.4 serving apps.cozystack.io, and its image
# dist/cozystack-apps-apiserver-image{/,.tar} (tools/image/build.py: the one binary).
# `make cluster` runs it on the node (no stand-in CRDs there). Built as
# kube-apiserver is (cgo on, -trimpath), with its dependencies at the versions
# tools/controlplane/kubernetes resolves, so every package it shares with kube-apiserver comes
# from the Go build cache; linked statically (the image holds no libc; glibc's linker warns
# about getaddrinfo and getpwnam: unused, the image has no nsswitch.conf, so Go's own resolver
# runs, and it resolves no name). With CGO_ENABLED=0 nothing above package net would be shared
# with that cache. Measured on the shared 2 cores with the modules downloaded: 20 s beside
# kube-apiserver's packages, 3 min 40 s with an empty Go build cache; the image 3 s (21 MiB).
aggapi: $(BIN)/cozystack-apps-apiserver $(DIST)/cozystack-apps-apiserver-image/index.json
$(BIN)/cozystack-apps-apiserver: FORCE
	@mkdir -p $(BIN)
	@$(CACHED_BUILD) --in tools/aggapi -- 'cd tools/aggapi && go build -trimpath \
	  -ldflags "$(GO_LDFLAGS) -buildid= -linkmode=external -extldflags=-static" -o $(abspath $@) .'
$(DIST)/cozystack-apps-apiserver-image/index.json: $(BIN)/cozystack-apps-apiserver tools/image/build.py build/image-revision | $(VENV)/.installed
	$(PY) tools/image/build.py cozystack-apps-apiserver --out $(DIST) --bin $(BIN)

# A live cluster with the webhook; `make cluster-down` stops it. The control plane on loopback,
# a node (containerd, kubelet, kube-scheduler, CNI bridge, device plugin advertising 4
# nvidia.com/GA100) and the webhook chart installed by Helm 4 with two pods from the image.
# The image and the chart come from a private registry on loopback (TLS, basic auth:
# tools/controlplane/registry.py): the image pushed there by skopeo and pulled by digest by the
# node's containerd with the chart's imagePullSecrets, the chart pushed by `helm push` and
# installed with `helm install oci://...`.
# Its NetworkPolicy (type kubernetes) is enforced on the node by kube-network-policies.
# Needs root (the node: cgroups, a bridge, mounts); see docs/guides/install.md.
# apps.cozystack.io is served as on Cozystack, by an aggregated API server in a pod (tools/aggapi,
# cozystack-api's stand-in; tools/controlplane/aggapi.py), which calls the webhook: no stand-in CRDs.
# `make cluster FLUX=1` adds helm-controller, the Flux CRDs and the tenant chart as its
# ExternalArtifact (docs/guides/flux-injection.md); `make cluster-injection-on|off` then do what
# `helm upgrade --set fluxInjection=true|false` does to the chart's webhook configurations.
CLUSTER_DIR ?= .cache/cluster
CLUSTER_GPUS := --gpu nvidia.com/GA100=4 --dra-gpus 4
cluster: venv binaries controlplane flux-controllers node image aggapi
	$(PY) tools/controlplane/cluster.py up --dir $(CLUSTER_DIR) --node --aggapi --registry --network-policy $(CLUSTER_GPUS) \
	  $(if $(FLUX),--flux)
cluster-down:
	@if [ -x $(PY) ]; then $(PY) tools/controlplane/cluster.py down --dir $(CLUSTER_DIR); fi
cluster-injection-on cluster-injection-off: cluster-%:
	$(PY) tools/controlplane/cluster.py $* --dir $(CLUSTER_DIR)

# Flux helm-controller v1.4.3 (Cozystack ships v1.5.0, which the Go module proxy refuses here; see
# tools/controlplane/helm-controller/go.mod), built from its Go module,
# and the Flux CRDs the test cluster installs, from the same modules. Built once;
# the first build takes about 8 minutes on 2 cores (downloads included).
FLUX_CRDS := .cache/flux-crds
flux-controllers: $(FLUX_CRDS)/.built
$(FLUX_CRDS)/.built: FORCE
	@mkdir -p $(BIN) $(FLUX_CRDS)
	@$(PYTHON) tools/cached_build.py flux-controllers --store "$(BUILD_STORE)" --key "$$(go env GOVERSION)" \
	  --out $@ $(BIN)/helm-controller $(FLUX_CRDS) --in tools/controlplane/helm-controller -- \
	  'tools/controlplane/helm-controller/build.sh $(BIN) $(FLUX_CRDS) && touch $@'

wheelhouse: $(WHEELHOUSE)/.fetched
$(WHEELHOUSE)/.fetched: pyproject.toml | $(VENV)/.installed
	mkdir -p $(WHEELHOUSE)
	$(PY) -c "import tomllib; print('\\n'.join(tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies']))" > $(WHEELHOUSE)/requirements.txt
	$(PY) -m pip download -q -d $(WHEELHOUSE) -r $(WHEELHOUSE)/requirements.txt
	touch $@

# The Python wheel and sdist, the two charts as Helm chart archives with a
# repository index.yaml, and the Helm 4 plugin as an archive
# (`helm plugin install dist/helm-plugin/cozyrender-<version>.tgz --verify=false`: unsigned).
dist: venv binaries
	rm -rf $(DIST) $(HELM_TMP)
	$(PY) -m build --no-isolation --outdir $(DIST) .
	HELM_DATA_HOME=$(HELM_TMP)/data HELM_CONFIG_HOME=$(HELM_TMP)/config HELM_CACHE_HOME=$(HELM_TMP)/cache \
	  $(BIN)/helm4 package charts/tenant charts/cozystack-basics charts/cozyrender-webhook -d $(DIST)/charts
	HELM_DATA_HOME=$(HELM_TMP)/data HELM_CONFIG_HOME=$(HELM_TMP)/config HELM_CACHE_HOME=$(HELM_TMP)/cache \
	  $(BIN)/helm4 repo index $(DIST)/charts
	HELM_DATA_HOME=$(HELM_TMP)/data HELM_CONFIG_HOME=$(HELM_TMP)/config HELM_CACHE_HOME=$(HELM_TMP)/cache \
	  $(BIN)/helm4 plugin package plugins/cozyrender --sign=false -d $(DIST)/helm-plugin
	rm -rf $(HELM_TMP)

# The node's and the image build's Debian packages: mmdebstrap (the image's root filesystem),
# umoci and skopeo (unpack and inspect OCI layouts), runc, containerd and the CNI plugins
# (bridge, host-local, loopback) for the test node, iproute2 and iptables for its pod network;
# docker-registry (distribution 2.8) and apache2-utils' htpasswd (bcrypt, as distribution's
# htpasswd authentication requires) for the node's private registry (tools/controlplane/registry.py),
# which skopeo pushes the image to. CI runs as root on a fresh machine.
NODE_PACKAGES := mmdebstrap umoci skopeo runc containerd containernetworking-plugins iproute2 iptables \
  docker-registry apache2-utils
NODE_TOOLS := /usr/bin/mmdebstrap /usr/bin/umoci /usr/bin/skopeo /usr/sbin/runc /usr/bin/containerd /usr/lib/cni/bridge \
  /usr/bin/docker-registry /usr/bin/htpasswd
node-packages: $(NODE_TOOLS)
$(NODE_TOOLS) &:
	apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $(NODE_PACKAGES)

# The images, built here from Debian's packages and the wheel, never pulled (tools/image/build.py):
# dist/cozyrender-image/ (OCI layout) and dist/cozyrender-image.tar (also `docker load`-able),
# and the node's sandbox image dist/pause-image{/,.tar}. The same tree and mirror give the same
# digest. Measured on 2 cores: 2 min 30 s (mmdebstrap about 40 s of it), 157 MB compressed.
# The commit is an input too: it is the revision label and the timestamps (SOURCE_DATE_EPOCH).
IMAGE_INPUTS := $(shell git ls-files cozyrender bin pyproject.toml setup.py MANIFEST.in tools/image 2>/dev/null)
IMAGE_REVISION := $(shell git rev-parse HEAD 2>/dev/null)
image: $(DIST)/cozyrender-image/index.json $(DIST)/pause-image/index.json
build/image-revision: FORCE
	@mkdir -p build; [ "$$(cat $@ 2>/dev/null)" = "$(IMAGE_REVISION)" ] || echo "$(IMAGE_REVISION)" > $@
FORCE:
$(DIST)/cozyrender-image/index.json: $(IMAGE_INPUTS) build/image-revision $(WHEELHOUSE)/.fetched | $(NODE_TOOLS)
	$(PY) tools/image/build.py cozyrender --out $(DIST) --wheelhouse $(WHEELHOUSE)
$(DIST)/pause-image/index.json: tools/image/pause/main.go tools/image/pause/go.mod tools/image/build.py build/image-revision
	$(PY) tools/image/build.py pause --out $(DIST)

demo: venv
	$(PY) -m cozyrender.demo

# Debian's chromium for the pool tree page's tests and picture (Playwright drives
# it; no browser is downloaded). CI runs as root on a fresh machine.
CHROMIUM := /usr/bin/chromium
chromium: $(CHROMIUM)
$(CHROMIUM):
	apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium

# docs/images/pool-tree.png: the pool tree page of the bundled example.
screenshot: venv chromium
	$(PY) tools/tree_screenshot.py docs/images/pool-tree.png

# Debian's Prometheus and promtool: the PrometheusRule's `promtool test rules` and the live
# test in which Prometheus scrapes the controller (tests/test_controller_rules.py,
# tests/test_controller_metrics_live.py). CI runs as root on a fresh machine.
PROMETHEUS := /usr/bin/prometheus
prometheus: $(PROMETHEUS)
$(PROMETHEUS):
	apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends prometheus

# The whole suite, on PYTEST_WORKERS pytest-xdist workers (`--dist loadgroup`: the groups that
# tests/conftest.py gives keep each module, each session plane and the one node on one worker).
# It writes the JUnit report build/test-report.xml (each test's setup + call + teardown, and
# each plane's start as the property `plane-start`), prints pytest's slowest tests, and writes
# the per-module table build/test-times.md (tools/test_times.py), also when a test fails.
PYTEST_WORKERS ?= 2
PYTEST_XDIST = -n $(PYTEST_WORKERS) --dist loadgroup
TEST_REPORT := build/test-report.xml
test: venv binaries controlplane flux-controllers wheelhouse chromium prometheus image node certmanager aggapi
	@mkdir -p build
	$(PY) -m pytest $(PYTEST_XDIST) --durations=30 --junitxml=$(TEST_REPORT); status=$$?; \
	  $(PY) tools/test_times.py $(TEST_REPORT) > build/test-times.md && head -1 build/test-times.md; exit $$status

# The inner loop: every test that starts no live plane or process (no kube-apiserver, node,
# Flux, container, Chromium; no `make image`), by the `live` marker tests/conftest.py applies
# from the fixtures a test uses. Needs only the venv, the pinned helm/kubectl, the wheelhouse
# (the wheel test's offline install) and Debian's promtool.
test-fast: venv binaries wheelhouse prometheus
	@mkdir -p build
	$(PY) -m pytest -m "not live" $(PYTEST_XDIST) --durations=15 --junitxml=build/test-fast-report.xml

bench: venv binaries chromium
	$(PY) -m compileall -q cozyrender
	$(PY) bench/run.py

.PHONY: docs docs-update

# The docs site (MkDocs + Material, from the `docs` extra installed in the venv),
# built in strict mode: a broken link, a page missing from the nav or any
# warning fails it. The site goes to build/site.
docs: venv
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict --site-dir build/site

# Regenerate what the docs take from the code, then review the diff like code:
# the reference pages (commands, chart parameters, GPUClass CRD, error
# messages), the render-path diagram, and the output shown in the docs'
# `console` examples. The tests fail when any of them drifts.
docs-update: venv
	$(PY) tools/gen_docs_reference.py
	$(PY) tools/draw_render_path.py
	COZYRENDER_UPDATE_DOCS=1 $(PY) -m pytest -q tests/test_docs_examples.py

clean:
	rm -rf $(VENV) .cache build $(DIST) *.egg-info
