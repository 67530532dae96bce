"""Issue 27 item 1: writes checked against the apps' schemas as the API server
checks them under strict field validation: an unknown field is refused with
the field meant, a wrong type is refused naming the field; and the stand-in
CRDs of the test cluster leave the one schema (cozyrender.appspec, through
the webhook) to apply."""

from __future__ import annotations

import json

import pytest
import yaml

from cozyrender.appspec import KINDS, spec_problems, spec_schema
from cozyrender.state import load_objects
from tests.conftest import ROOT

APPS = "apps.cozystack.io/v1alpha1"


def obj(kind: str, spec: dict) -> dict:
    return {"apiVersion": APPS, "kind": kind, "metadata": {"name": "x", "namespace": "tenant-a"}, "spec": spec}


@pytest.mark.parametrize(("kind", "spec", "expected"), [
    ("VMInstance", {"gpu": [{"class": "a100"}]}, [("spec.gpu", "unknown field; did you mean spec.gpus?")]),
    ("VMInstance", {"gpus": [{"clas": "a100"}]}, [("spec.gpus[0].clas", "unknown field; did you mean spec.gpus[0].class?")]),
    ("VMInstance", {"gpus": "a100"}, [("spec.gpus", "Invalid value: string: must be of type array")]),
    ("VMInstance", {"gpus": [{"class": "a100", "count": "two"}]},
     [("spec.gpus[0].count", "Invalid value: string: must be of type integer")]),
    ("Tenant", {"resourceQuota": {"cpu": 4}}, [("spec.resourceQuota", "unknown field; did you mean spec.resourceQuotas?")]),
    ("Tenant", {"gpu": {"vgpu": True}, "resourceQuotas": {"cpu": 4}}, []),
    ("Tenant", {"gpu": True}, [("spec.gpu", "Invalid value: boolean: must be of type object")]),
    ("KubernetesNodes", {"gpu": [{"class": "a100"}], "cluster": "k", "diskSize": "20Gi", "roles": ["ingress-nginx"]},
     [("spec.gpu", "unknown field; did you mean spec.gpus?")]),
    ("KubernetesNodes", {"cluster": "k", "instanceType": "u1.medium", "minReplicas": 0, "maxReplicas": 2,
                         "resources": {"cpu": 2, "memory": "4Gi"}, "gpus": [{"class": "a100", "count": 1}]}, []),
    ("KubernetesNodes", {"maxReplicas": "3"}, [("spec.maxReplicas", "Invalid value: string: must be of type integer")]),
    ("Kubernetes", {"nodeGroups": {"md0": {"maxReplica": 2, "gpus": [{"class": "a100"}]}}},
     [("spec.nodeGroups.md0.maxReplica", "unknown field; did you mean spec.nodeGroups.md0.maxReplicas?")]),
    ("Kubernetes", {"nodeGroup": {}}, [("spec.nodeGroup", "unknown field; did you mean spec.nodeGroups?")]),
])
def test_a_field_the_schema_refuses_is_named(kind, spec, expected):
    assert list(spec_problems(obj(kind, spec))) == expected


def test_an_unknown_field_far_from_any_lists_the_known_ones():
    [(field, message)] = spec_problems(obj("VMInstance", {"zzzzzz": 1}))
    assert field == "spec.zzzzzz" and message.startswith("unknown field (known: ") and "gpus" in message


def test_the_tenant_schema_is_the_tenant_charts_less_the_platforms_values():
    chart = json.loads((ROOT / "charts" / "tenant" / "values.schema.json").read_text())
    assert set(spec_schema("Tenant")["properties"]) == set(chart["properties"]) - {"_cluster", "_namespace"}
    values = yaml.safe_load((ROOT / "charts" / "tenant" / "values.yaml").read_text())
    spec = {key: value for key, value in values.items() if not key.startswith("_")}
    assert list(spec_problems(obj("Tenant", spec))) == []


@pytest.mark.parametrize("app,kind", [("vm-instance", "VMInstance"), ("kubernetes", "Kubernetes")])
def test_cozystacks_own_defaults_pass_its_schema(app, kind):
    values = yaml.safe_load((ROOT / "tests" / "data" / "chartdocs-upstream" / app / "values.yaml").read_text())
    assert list(spec_problems(obj(kind, values))) == []


def test_every_bundled_example_passes():
    objects = load_objects([ROOT / "examples"])
    apps = [o for o in objects if o.get("kind") in KINDS and str(o.get("apiVersion", "")).startswith("apps.")]
    assert len(apps) >= 5
    assert [(o["metadata"]["name"], list(spec_problems(o))) for o in apps if list(spec_problems(o))] == []


def test_the_standin_crds_keep_spec_as_written_and_name_the_schema():
    path = ROOT / "tools" / "controlplane" / "crds" / "apps-cozystack-io-standins.yaml"
    text = path.read_text()
    crds = {doc["spec"]["names"]["kind"]: doc for doc in yaml.safe_load_all(text) if doc}
    assert set(crds) == set(KINDS)
    for kind, crd in crds.items():
        [version] = crd["spec"]["versions"]
        spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
        # Never pruned: the webhook sees `spec.gpu` whatever field validation the client asks for.
        assert spec == {"type": "object", "x-kubernetes-preserve-unknown-fields": True}, kind
    assert "cozyrender/appspec.py" in text


@pytest.mark.parametrize("kind", KINDS)
def test_check_refuses_an_unknown_field_through_the_command(kind, tmp_path):
    import subprocess
    import sys

    spec = {"Tenant": {"resourceQuota": {"cpu": 4}}, "Kubernetes": {"nodeGroup": {}}}.get(kind, {"gpu": [{"class": "a100"}]})
    meant = {"Tenant": "spec.resourceQuotas", "Kubernetes": "spec.nodeGroups"}.get(kind, "spec.gpus")
    write = tmp_path / "write.yaml"
    namespace = "tenant-acme" if kind != "Tenant" else "tenant-root"
    write.write_text(yaml.safe_dump({**obj(kind, spec), "metadata": {"name": "x", "namespace": namespace}}))
    result = subprocess.run([sys.executable, "-m", "cozyrender", "check", "--state", str(ROOT / "examples" / "budgets" / "state"),
                             "--write", str(write), "-o", "json"], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert result.returncode == 1, result.stderr
    reasons = json.loads(result.stdout)["reasons"]
    assert any(r["message"].endswith(f"unknown field; did you mean {meant}?") for r in reasons), reasons
