"""Regenerate the bundled CRD schemas from their sources (a maintainer's tool,
not used at run time): `python -m cozyrender.schemas.extract MIRRORS_DIR`,
where MIRRORS_DIR holds the git mirrors `cozystack+cozystack/repo` and
`datreeio+CRDs-catalog/repo`. Each file is the served version's
openAPIV3Schema without descriptions (see README.md for sources)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import yaml

from cozyrender.schemas.crd import served_schema, strip_descriptions

HERE = Path(__file__).resolve().parent
COZYSTACK = ("cozystack+cozystack/repo", "3c780acd417f086f8f18d040d0d7020ff55d3ba3")
DATREE = ("datreeio+CRDs-catalog/repo", "7b1e26ef9deea49293714d204c1a2270aab1178f")

# output file -> (mirror, path, CRD name or None for a JSON schema file, version)
SOURCES = {
    "helm.toolkit.fluxcd.io_v2_helmrelease.json":
        (COZYSTACK, "internal/fluxinstall/manifests/fluxcd.yaml",
         "helmreleases.helm.toolkit.fluxcd.io", "v2"),
    "v1.edp.epam.com_v1_keycloakrealmgroup.json":
        (COZYSTACK, "packages/system/keycloak-operator/charts/keycloak-operator/crds/"
                    "v1.edp.epam.com_keycloakrealmgroups.yaml",
         "keycloakrealmgroups.v1.edp.epam.com", "v1"),
    # The webhook chart's optional scrape objects (charts/cozyrender-webhook/templates/monitoring.yaml).
    "operator.victoriametrics.com_v1beta1_vmservicescrape.json":
        (COZYSTACK, "packages/system/victoria-metrics-operator/charts/victoria-metrics-operator/charts/crds/"
                    "crds/crd.yaml",
         "vmservicescrapes.operator.victoriametrics.com", "v1beta1"),
    "monitoring.coreos.com_v1_servicemonitor.json":
        (COZYSTACK, "packages/system/prometheus-operator-crds/charts/prometheus-operator-crds/charts/crds/"
                    "templates/crd-servicemonitors.yaml",
         "servicemonitors.monitoring.coreos.com", "v1"),
    "cilium.io_v2_ciliumnetworkpolicy.json":
        (DATREE, "cilium.io/ciliumnetworkpolicy_v2.json", None, "v2"),
    "cilium.io_v2_ciliumclusterwidenetworkpolicy.json":
        (DATREE, "cilium.io/ciliumclusterwidenetworkpolicy_v2.json", None, "v2"),
}


def _show(mirrors: Path, mirror: tuple[str, str], path: str) -> str:
    repo, commit = mirror
    return subprocess.run(["git", "-C", str(mirrors / repo), "show", f"{commit}:{path}"],
                          check=True, capture_output=True, text=True).stdout


def main(argv: list[str]) -> None:
    mirrors = Path(argv[0])
    for out, (mirror, path, crd_name, version) in SOURCES.items():
        text = _show(mirrors, mirror, path)
        if path.endswith(".yaml") and "/templates/" in path:  # a chart template around a CRD: its action lines go
            text = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("{{"))
        if crd_name is None:
            schema = json.loads(text)
        else:
            crd = next(d for d in yaml.safe_load_all(text)
                       if d and d.get("kind") == "CustomResourceDefinition"
                       and d["metadata"]["name"] == crd_name)
            schema = served_schema(crd, version)
        (HERE / out).write_text(json.dumps(strip_descriptions(schema), sort_keys=True,
                                           separators=(",", ":")) + "\n")
        print(f"wrote {out}")


if __name__ == "__main__":
    main(sys.argv[1:])
