"""Installable anywhere (issue 12 item 1): `make dist` builds the wheel and
sdist, the charts as Helm chart archives with an index.yaml, and the Helm 4
plugin archive; the wheel, installed into a fresh virtualenv (offline, from
the wheels `make wheelhouse` downloaded), runs every command from a folder
outside the repository, and the real Helm 4 installs the plugin archive and
post-renders through the installed command."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT

WHEELHOUSE = Path(os.environ.get("COZYRENDER_WHEELHOUSE") or ROOT / ".venv" / "wheelhouse")
def chart_archive(name: str) -> str:
    """`helm package`'s file name for a chart of this repository: NAME-VERSION.tgz."""
    version = yaml.safe_load((ROOT / "charts" / name / "Chart.yaml").read_text())["version"]
    return f"{name}-{version}.tgz"


CRD = "cozyrender/_charts/cozystack-basics/crds/gpuclasses.cozystack.io.yaml"


def version() -> str:
    from tests.test_version import source_version

    return source_version()


@pytest.fixture(scope="module")
def dist(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("dist") / "dist"
    result = subprocess.run(["make", "-s", "dist", f"DIST={out}", f"PY={sys.executable}"], cwd=ROOT,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    return out


@pytest.fixture(scope="module")
def installed(dist, tmp_path_factory) -> Path:
    """The bin folder of a fresh virtualenv holding the wheel and its dependencies only."""
    assert (WHEELHOUSE / ".fetched").is_file(), (
        f"{WHEELHOUSE} is missing: run `make wheelhouse` (make test does) to download the dependencies' wheels")
    venv = tmp_path_factory.mktemp("fresh") / "venv"
    subprocess.run([sys.executable, "-m", "venv", venv], check=True, timeout=300)
    wheel = next(dist.glob("cozyrender-*.whl"))
    result = subprocess.run([venv / "bin" / "python", "-m", "pip", "install", "-q", "--no-index",
                             "--find-links", WHEELHOUSE, wheel], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    return venv / "bin"


def test_dist_holds_every_artifact(dist):
    v = version()
    names = sorted(str(p.relative_to(dist)) for p in dist.rglob("*") if p.is_file())
    assert names == sorted([
        f"cozyrender-{v}-py3-none-any.whl", f"cozyrender-{v}.tar.gz",
        f"charts/{chart_archive('tenant')}", f"charts/{chart_archive('cozystack-basics')}",
        f"charts/{chart_archive('cozyrender-webhook')}", "charts/index.yaml",
        f"helm-plugin/cozyrender-{v}.tgz",
    ]), names
    with zipfile.ZipFile(dist / f"cozyrender-{v}-py3-none-any.whl") as wheel:
        files = set(wheel.namelist())
    assert CRD in files and "cozyrender/_charts/tenant/Chart.yaml" in files
    with tarfile.open(dist / f"cozyrender-{v}.tar.gz") as sdist:
        members = set(sdist.getnames())
    assert f"cozyrender-{v}/charts/cozystack-basics/crds/gpuclasses.cozystack.io.yaml" in members
    assert f"cozyrender-{v}/plugins/cozyrender/plugin.yaml" in members
    index = yaml.safe_load((dist / "charts" / "index.yaml").read_text())
    assert set(index["entries"]) == {"tenant", "cozystack-basics", "cozyrender-webhook"}
    # the plugin's version follows the package's (helm names the archive after it)
    plugin = yaml.safe_load((ROOT / "plugins" / "cozyrender" / "plugin.yaml").read_text())
    assert plugin["version"] == v


def run(bin_dir: Path, *args, cwd: Path, stdin: bytes | None = None, env: dict | None = None
        ) -> subprocess.CompletedProcess:
    path = f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"
    merged = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    merged.update({"PATH": path, **(env or {})})
    return subprocess.run([str(a) for a in args], cwd=cwd, input=stdin if stdin is not None else b"",
                          capture_output=True, timeout=300,
                          env={k: v for k, v in merged.items() if v is not None})


def test_the_wheel_runs_every_command_outside_the_repository(installed, tmp_path):
    work = tmp_path / "elsewhere"
    work.mkdir()
    cozy = installed / "cozyrender"
    where = run(installed, installed / "python", "-c", "import cozyrender.resources as r; print(r.crd_path())", cwd=work)
    assert where.returncode == 0 and str(installed.parent) in where.stdout.decode(), where
    assert not where.stdout.decode().startswith(str(ROOT))

    assert run(installed, cozy, "--version", cwd=work).stdout.decode().strip().endswith(version())
    for command in ("post-render", "template", "golden", "check", "catalog", "gpuclass", "flux", "completion", "tree", "webhook"):
        helped = run(installed, cozy, command, "--help", cwd=work)
        assert helped.returncode == 0 and b"Usage:" in helped.stdout, (command, helped.stderr)

    # template with the bundled chart, then post-render on the hot path
    raw = run(installed, cozy, "template", "tenant-a", "tenant", "-n", "tenant-root", "--raw", "--set", "gpu.vgpu=true",
              "--set", "resourceQuotas.cpu=2", "--set", "resourceQuotas.a100\\.gpuclass\\.cozystack\\.io/devices=2",
              cwd=work)
    assert raw.returncode == 0, raw.stderr
    rendered = run(installed, cozy, "post-render", cwd=work, stdin=raw.stdout)
    assert rendered.returncode == 0 and b"gpuclass.cozystack.io" not in rendered.stdout, rendered.stderr
    in_one = run(installed, cozy, "template", "tenant-a", "tenant", "-n", "tenant-root", "--set", "gpu.vgpu=true",
                 "--set", "resourceQuotas.cpu=2", "--set", "resourceQuotas.a100\\.gpuclass\\.cozystack\\.io/devices=2",
                 cwd=work)
    assert in_one.stdout == rendered.stdout

    # gpuclass validate and check of a GPUClass need the shipped CRD (the defect)
    shutil.copytree(ROOT / "examples" / "cluster", work / "cluster")
    shutil.copytree(ROOT / "examples" / "budgets", work / "budgets")
    valid = run(installed, cozy, "gpuclass", "validate", "cluster/gpuclasses.yaml", "-o", "json", cwd=work)
    assert valid.returncode == 0 and json.loads(valid.stdout)["valid"] is True, valid.stderr
    listed = yaml.safe_load((work / "cluster" / "gpuclasses.yaml").read_text())
    stored = listed["items"][0] if listed.get("kind") == "List" else listed
    # the stored class written again: an update, validated against the CRD, admitted
    gpuclass_write = run(installed, cozy, "check", "--state", "cluster", "--write", "-", cwd=work,
                         stdin=yaml.safe_dump(stored).encode())
    assert gpuclass_write.returncode == 0 and gpuclass_write.stdout.startswith(b"admitted"), \
        gpuclass_write.stdout + gpuclass_write.stderr
    refused = run(installed, cozy, "check", "--state", "budgets/state", "--write", "budgets/vm-refused.yaml", cwd=work)
    assert refused.returncode == 1 and refused.stdout.startswith(b"refused"), refused.stderr
    catalog = run(installed, cozy, "catalog", "--state", "cluster", cwd=work)
    assert catalog.returncode == 0 and b"a100-4c" in catalog.stdout, catalog.stderr
    # the pool tree's page: its template is package data
    page = run(installed, cozy, "tree", "--state", "budgets/state", "-o", "html", cwd=work)
    assert page.returncode == 0 and b"GPU pool tree" in page.stdout and b"tenant-acme-ml" in page.stdout, page.stderr

    # flux: the README's example against the bundled chart, in sync, then written afresh
    shutil.copytree(ROOT / "examples" / "flux", work / "flux")
    flux_args = ["flux", "tenant-a", "tenant", "-n", "tenant-root", "-f", "flux/parent-values.yaml",
                 "--helmrelease", "flux/tenant-a.yaml"]
    in_sync = run(installed, cozy, *flux_args, "--check", cwd=work)
    assert in_sync.returncode == 0, in_sync.stdout + in_sync.stderr
    printed = run(installed, cozy, "flux", "tenant-a", "tenant", "-n", "tenant-root", "-f", "flux/parent-values.yaml",
                  cwd=work)
    assert printed.returncode == 0 and b"cozyrender flux: generated" in printed.stdout, printed.stderr

    # golden cases naming the bundled chart as the README writes it
    case = work / "cases" / "a"
    case.mkdir(parents=True)
    (case / "case.yaml").write_text("chart: charts/tenant\nrelease: tenant-b\nnamespace: tenant-a\n"
                                    "set: [resourceQuotas.cpu=2]\n")
    assert run(installed, cozy, "golden", "cases", "--update", cwd=work).returncode == 0
    checked = run(installed, cozy, "golden", "cases", "--junit", "golden.xml", cwd=work)
    assert checked.returncode == 0 and b"1 case, 0 failed" in checked.stdout, checked.stdout + checked.stderr
    assert b'failures="0"' in (work / "golden.xml").read_bytes()

    completion = run(installed, cozy, "completion", "bash", cwd=work)
    assert completion.returncode == 0 and b"_COZYRENDER_COMPLETE" in completion.stdout


def test_helm4_installs_the_plugin_archive_and_post_renders(installed, dist, helm4, tmp_path):
    # Helm 4.1.4 installs into $HELM_DATA_HOME/plugins even when HELM_PLUGINS is set (and then
    # lists HELM_PLUGINS): give Helm 4 its own data home instead.
    env = {f"HELM_{name}_HOME": str(tmp_path / "helm" / name.lower()) for name in ("CONFIG", "DATA", "CACHE")}
    env["HELM_PLUGINS"] = None  # unset
    archive = next((dist / "helm-plugin").glob("cozyrender-*.tgz"))
    # unsigned: Helm 4 verifies tarballs against a .prov unless told not to
    unsigned = run(installed, helm4, "plugin", "install", archive, cwd=tmp_path, env=env)
    assert unsigned.returncode != 0 and b".prov" in unsigned.stderr
    added = run(installed, helm4, "plugin", "install", archive, "--verify=false", cwd=tmp_path, env=env)
    assert added.returncode == 0, added.stderr
    listed = run(installed, helm4, "plugin", "list", cwd=tmp_path, env=env)
    assert b"cozyrender" in listed.stdout and b"postrenderer/v1" in listed.stdout
    chart = dist / "charts" / chart_archive("tenant")
    values = ["--set", "resourceQuotas.cpu=2", "--set", "resourceQuotas.a100\\.gpuclass\\.cozystack\\.io/devices=2"]
    through_helm = run(installed, helm4, "template", "tenant-foo", chart, "-n", "tenant-root", *values,
                       "--post-renderer", "cozyrender", cwd=tmp_path, env=env)
    assert through_helm.returncode == 0, through_helm.stderr
    ours = run(installed, installed / "cozyrender", "template", "tenant-foo", chart, "-n", "tenant-root", *values,
               cwd=tmp_path)
    assert ours.returncode == 0, ours.stderr

    def objects(text: bytes) -> dict:
        found = {}
        for doc in yaml.safe_load_all(text):
            if doc:
                doc["metadata"].get("annotations", {}).pop("postrenderer.helm.sh/postrender-filename", None)
                if doc["metadata"].get("annotations") == {}:
                    del doc["metadata"]["annotations"]
                found[(doc["kind"], doc["metadata"]["name"])] = doc
        return found

    assert objects(through_helm.stdout) == objects(ours.stdout)
    assert "gpuclass.cozystack.io" not in json.dumps(objects(ours.stdout)[("ResourceQuota", "tenant-quota")])
