"""Parity with Cozystack's tenant chart (packages/apps/tenant at 3c780acd).

For every stored render of Cozystack's chart (tests/data/cozystack-3c780acd/,
made by render_upstream.py there, and the shared references in
../shared/reference/cozystack-3c780acd/tenant-*), our chart is rendered with
the same release, namespace, values and API versions, post-rendered, and
compared object by object with Cozystack's output after applying exactly the
documented GPU differences (`expected_from_upstream`). Where Cozystack's chart
refuses the values (upstream-error.txt), ours must refuse them too.
"""

from __future__ import annotations

import copy
import shlex
import subprocess
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
import yaml

from cozyrender import render, validate
from cozyrender.entitlement import VGPU_LABEL, flag_value
from cozyrender.keys import in_budget_domain
from cozyrender.postrender import PostRenderError, post_render
from cozyrender.render import RenderError
from tests.conftest import ROOT

TENANT = ROOT / "charts" / "tenant"
DATA = ROOT / "tests" / "data" / "cozystack-3c780acd"
SHARED = ROOT.parent / "shared" / "reference" / "cozystack-3c780acd"


def _renders_tenant(case: Path) -> bool:
    """A reference of Cozystack's tenant chart (the folder also holds
    cozystack-basics references, which test the basics chart)."""
    for name in ("upstream.yaml", "upstream-error.txt"):
        if (case / name).is_file():
            first = (case / name).read_text(encoding="utf-8").partition("\n")[0]
            return "<upstream apps/tenant>" in first
    return False


def reference_dirs() -> list[Path]:
    dirs = sorted(p for p in DATA.iterdir() if p.is_dir() and _renders_tenant(p))
    if SHARED.is_dir():
        dirs += sorted(p for p in SHARED.iterdir() if p.is_dir() and _renders_tenant(p))
    return dirs


def header(path: Path) -> tuple[str, str, list[str]]:
    """(release, namespace, api versions) from the `# helm template ...` line."""
    words = shlex.split(path.read_text(encoding="utf-8").splitlines()[0].lstrip("# "))
    assert words[:2] == ["helm", "template"], path
    release, namespace = words[2], words[words.index("-n") + 1]
    api = [words[i + 1] for i, w in enumerate(words) if w == "--api-versions"]
    return release, namespace, api


# ---------------------------------------------------------------- normalising


def _script(text: str) -> list[str]:
    """A shell script without its comments and blank lines: Cozystack's cleanup
    script carries long comments; ours carries the same commands only."""
    lines = (line.rstrip() for line in text.splitlines())
    return [line for line in lines if line and not line.lstrip().startswith("#")]


def canonical(objs: Iterable[Any]) -> dict[tuple[str, str, str], Any]:
    """Objects by (kind, namespace, name), with the values Secret's values.yaml
    parsed (formatting may differ, values may not) and the Job's script
    reduced to its commands."""
    out: dict[tuple[str, str, str], Any] = {}
    for obj in objs:
        if not obj:
            continue
        obj = copy.deepcopy(obj)
        meta = obj["metadata"]
        if obj["kind"] == "Secret" and "values.yaml" in obj.get("stringData", {}):
            obj["stringData"]["values.yaml"] = yaml.safe_load(obj["stringData"]["values.yaml"])
        if obj["kind"] == "Job":
            for container in obj["spec"]["template"]["spec"]["containers"]:
                container["command"] = [_script(c) if "\n" in c else c
                                        for c in container["command"]]
        key = (obj["kind"], meta.get("namespace", ""), meta["name"])
        assert key not in out, f"duplicate object {key}"
        out[key] = obj
    return out


def expected_from_upstream(upstream: dict, values: dict) -> dict:
    """Cozystack's objects plus exactly the GPU changes of the pull request:
    - budget keys (any key in the gpuclass.cozystack.io domain) leave every
      ResourceQuota; a quota left empty goes, with its namespace's LimitRanges;
    - the tenant Namespace carries namespace.cozystack.io/vgpu, "true" only when
      the tenant asks (gpu.vgpu) and its parent is entitled (_namespace.vgpu),
      each true or "true" (the chart's flag rule, entitlement.flag_value);
    - the values Secret has `_namespace.vgpu: true` only when entitled and keeps
      `_cluster.gpu-vgpu` only when it is on."""
    out = copy.deepcopy(upstream)
    parent = values.get("_namespace") or {}
    entitled = (flag_value((values.get("gpu") or {}).get("vgpu")) is True
                and flag_value(parent.get("vgpu") if isinstance(parent, dict) else None) is True)
    emptied = set()
    for key, obj in list(out.items()):
        if obj["kind"] == "ResourceQuota":
            hard = obj["spec"]["hard"]
            for quota_key in [k for k in hard if in_budget_domain(k)]:
                del hard[quota_key]
            if not hard:
                del out[key]
                emptied.add(key[1])
    for key, obj in list(out.items()):
        if obj["kind"] == "LimitRange" and key[1] in emptied:
            del out[key]
        elif obj["kind"] == "Namespace":
            obj["metadata"]["labels"][VGPU_LABEL] = "true" if entitled else "false"
        elif obj["kind"] == "Secret" and obj["metadata"]["name"] == "cozystack-values":
            secret_values = obj["stringData"]["values.yaml"]
            namespace = secret_values.setdefault("_namespace", {})
            namespace.pop("vgpu", None)
            if entitled:
                namespace["vgpu"] = True
            cluster = secret_values.get("_cluster") or {}
            if "gpu-vgpu" in cluster and cluster["gpu-vgpu"] not in (True, "true"):
                del cluster["gpu-vgpu"]
    return out


# ---------------------------------------------------------------- rendering


def render_ours(values_file: Path, release: str, namespace: str, api: list[str], helm4: Path
                ) -> str:
    """Our chart's raw output: the Helm SDK in process, or the helm 4 binary
    when the case declares API versions (the SDK cannot)."""
    if not api:
        return render.template(TENANT, render.load_values([values_file]), release,
                               namespace).decode()
    command = [str(helm4), "template", release, str(TENANT), "-n", namespace, "-f",
               str(values_file)] + [a for v in api for a in ("--api-versions", v)]
    proc = subprocess.run(command, capture_output=True, text=True)
    if proc.returncode:
        raise RenderError(proc.stderr.strip())
    return proc.stdout


def diff(expected: dict, actual: dict) -> list[str]:
    problems = []
    for key in sorted(expected.keys() | actual.keys()):
        if key not in actual:
            problems.append(f"missing {key}")
        elif key not in expected:
            problems.append(f"unexpected {key}")
        elif expected[key] != actual[key]:
            problems.append(f"differs {key}:\n--- cozystack (+GPU changes)\n"
                            f"{yaml.safe_dump(expected[key])}\n+++ ours\n"
                            f"{yaml.safe_dump(actual[key])}")
    return problems


CASES = reference_dirs()


def test_there_are_dozens_of_reference_renders() -> None:
    accepted = [d for d in CASES if (d / "upstream.yaml").is_file()]
    refused = [d for d in CASES if (d / "upstream-error.txt").is_file()]
    assert len(accepted) >= 50 and len(refused) >= 10
    assert len(accepted) + len(refused) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=lambda p: p.name)
def test_parity_with_cozystack(case: Path, helm4: Path) -> None:
    values = render.load_values([case / "values.yaml"])  # read as Helm reads it
    upstream_file = case / "upstream.yaml"
    if not upstream_file.is_file():
        release, namespace, api = header(case / "upstream-error.txt")
        with pytest.raises((RenderError, PostRenderError)):
            post_render(render_ours(case / "values.yaml", release, namespace, api, helm4).encode())
        return
    release, namespace, api = header(upstream_file)
    raw = render_ours(case / "values.yaml", release, namespace, api, helm4)
    output = post_render(raw.encode()).output
    documents = list(yaml.safe_load_all(output))
    findings = [str(f) for f in validate.validate_objects(documents)]  # offline schemas
    assert findings == [], findings
    ours = canonical(documents)
    upstream = canonical(yaml.safe_load_all(upstream_file.read_text(encoding="utf-8")))
    problems = diff(expected_from_upstream(upstream, values), ours)
    assert not problems, "\n".join(problems)
