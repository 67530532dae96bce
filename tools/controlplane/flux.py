"""Flux on the test control plane (`cluster.py up --flux`, `make cluster FLUX=1`):
what Cozystack gives the tenant releases, on loopback.

- the Flux CRDs (HelmRelease; ExternalArtifact, HelmChart, OCIRepository),
  built by `make flux-controllers` into .cache/flux-crds;
- the CRDs of the kinds Cozystack's tenant chart renders (Cilium network
  policies, Keycloak groups), from the schemas bundled in cozyrender/schemas;
- the namespace cozy-monitoring (cozystack-basics renders into it);
- helm-controller, run with `--feature-gates=ExternalArtifact=true` as
  Cozystack runs it;
- the tenant chart, packaged as `make dist` packages it, served on loopback
  HTTP, and the ExternalArtifact `cozystack-tenant-application-default-tenant`
  in cozy-system pointing at it, its status set as its producer (Cozystack's
  operator) sets it.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import yaml

from common import ClusterError, free_port

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
ARTIFACT = "cozystack-tenant-application-default-tenant"
SCHEMAS = REPO / "cozyrender" / "schemas"
# (schema file, group, version, kind, plural, scope): the custom kinds the tenant chart renders
RENDERED_KINDS = (
    ("cilium.io_v2_ciliumnetworkpolicy.json", "cilium.io", "v2", "CiliumNetworkPolicy", "ciliumnetworkpolicies",
     "Namespaced"),
    ("cilium.io_v2_ciliumclusterwidenetworkpolicy.json", "cilium.io", "v2", "CiliumClusterwideNetworkPolicy",
     "ciliumclusterwidenetworkpolicies", "Cluster"),
    ("v1.edp.epam.com_v1_keycloakrealmgroup.json", "v1.edp.epam.com", "v1", "KeycloakRealmGroup",
     "keycloakrealmgroups", "Namespaced"),
)


def _structural(node):
    """A bundled schema as a structural CRD schema: the Cilium catalog's
    `additionalProperties: false` beside `properties` is dropped (the CRD has neither)."""
    if isinstance(node, dict):
        return {k: _structural(v) for k, v in node.items() if not (k == "additionalProperties" and v is False)}
    if isinstance(node, list):
        return [_structural(item) for item in node]
    return node


def rendered_kind_crd(schema_file: str, group: str, version: str, kind: str, plural: str, scope: str) -> dict:
    schema = _structural(json.loads((SCHEMAS / schema_file).read_text()))
    schema.pop("$schema", None)
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{plural}.{group}"},
            "spec": {"group": group, "scope": scope,
                     "names": {"kind": kind, "plural": plural, "singular": kind.lower(), "listKind": f"{kind}List"},
                     "versions": [{"name": version, "served": True, "storage": True,
                                   "schema": {"openAPIV3Schema": schema}}]}}


def start(plane) -> None:
    """Flux's CRDs, helm-controller and the tenant chart's ExternalArtifact on `plane`."""

    crds_dir = plane.bin.parent / "flux-crds"
    if not (crds_dir / ".built").exists() or not (plane.bin / "helm-controller").exists():
        raise ClusterError(f"{crds_dir} or {plane.bin / 'helm-controller'} is missing: run `make flux-controllers`")
    crds = [yaml.safe_load(path.read_text()) for path in sorted(crds_dir.glob("*.yaml"))]
    crds += [rendered_kind_crd(*spec) for spec in RENDERED_KINDS]
    plane.kubectl("apply", "--server-side", "-f", "-",
                  input=json.dumps({"apiVersion": "v1", "kind": "List", "items": crds}))
    plane.wait_crds_established()
    for namespace in ("cozy-system", "cozy-monitoring"):
        if plane.kubectl("get", "namespace", namespace, check=False).returncode != 0:
            plane.kubectl("create", "namespace", namespace)
    plane._spawn("helm-controller", [
        str(plane.bin / "helm-controller"), "--feature-gates=ExternalArtifact=true",
        f"--metrics-addr=127.0.0.1:{free_port()}", f"--health-addr=127.0.0.1:{free_port()}",
        "--concurrent=4", "--requeue-dependency=2s"], env={**os.environ, "KUBECONFIG": str(plane.kubeconfig)})
    serve_tenant_chart(plane)


def serve_tenant_chart(plane, chart: Path = REPO / "charts" / "tenant") -> Path:
    """Package `chart`, serve it on loopback and point the ExternalArtifact at it."""

    folder = plane.dir / "artifacts"
    folder.mkdir(exist_ok=True)
    for old in folder.glob("*.tgz"):
        old.unlink()
    home = plane.dir / "helm"
    packaged = subprocess.run([str(plane.bin / "helm4"), "package", str(chart), "-d", str(folder)],
                              capture_output=True, text=True,
                              env={**os.environ, "HELM_CACHE_HOME": str(home), "HELM_CONFIG_HOME": str(home),
                                   "HELM_DATA_HOME": str(home)})
    if packaged.returncode != 0:
        raise ClusterError(f"helm package {chart}: {packaged.stderr.strip()}")
    archive = next(folder.glob("*.tgz"))
    if "artifacts" not in plane.ports:
        port = plane.ports["artifacts"] = free_port()
        plane._spawn("artifacts", [sys.executable, "-m", "http.server", "--bind", "127.0.0.1", str(port),
                                   "--directory", str(folder)])
        plane._wait("the artifact server", lambda: subprocess.run(
            [sys.executable, "-c", f"import urllib.request; urllib.request.urlopen('http://127.0.0.1:{port}/', "
                                   "timeout=2)"], capture_output=True).returncode == 0, 30)
    digest = "sha256:" + hashlib.sha256(archive.read_bytes()).hexdigest()
    version = yaml.safe_load((chart / "Chart.yaml").read_text())["version"]
    plane.kubectl("apply", "-f", "-", input=json.dumps({
        "apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "ExternalArtifact",
        "metadata": {"name": ARTIFACT, "namespace": "cozy-system"},
        "spec": {"sourceRef": {"apiVersion": "cozystack.io/v1alpha1", "kind": "ApplicationDefinition",
                               "name": "tenant"}}}))
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    status = {"status": {
        "artifact": {"url": f"http://127.0.0.1:{plane.ports['artifacts']}/{archive.name}", "digest": digest,
                     "revision": f"{version}@{digest}", "path": archive.name, "lastUpdateTime": now,
                     "size": archive.stat().st_size},
        "conditions": [{"type": "Ready", "status": "True", "reason": "Succeeded", "lastTransitionTime": now,
                        "message": "served on loopback by tools/controlplane/flux.py", "observedGeneration": 1}]}}
    plane.kubectl("patch", "externalartifact", ARTIFACT, "-n", "cozy-system", "--subresource=status",
                  "--type=merge", "-p", json.dumps(status))
    return archive
