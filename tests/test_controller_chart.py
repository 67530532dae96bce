"""charts/cozyrender-webhook's controller objects, rendered by real Helm: a
Deployment of its own under its own service account, RBAC that grows only
with the controllers enabled (no Secret access without the license copier,
whose Secret writes a ValidatingAdmissionPolicy pins), the Lease by name,
and nothing at all with controller.enabled=false."""

from __future__ import annotations

import subprocess
from pathlib import Path

import yaml

from cozyrender.validate import validate_objects

ROOT = Path(__file__).resolve().parent.parent
CHART = ROOT / "charts" / "cozyrender-webhook"


def render(helm4: Path, *args: str) -> list[dict]:
    proc = subprocess.run([str(helm4), "template", "cozyrender-webhook", str(CHART), "-n", "cozyrender-system",
                           *args], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return [doc for doc in yaml.safe_load_all(proc.stdout) if doc]


def controller_rules(objects: list[dict]) -> list[dict]:
    bound = {b["roleRef"]["name"] for b in objects if b["kind"] in ("ClusterRoleBinding", "RoleBinding")
             and any(s["name"] == "cozyrender-controller" for s in b["subjects"])}
    return [rule for role in objects if role["kind"] in ("ClusterRole", "Role") and role["metadata"]["name"] in bound
            for rule in role["rules"]]


def test_the_controller_is_its_own_deployment_and_valid(helm4: Path) -> None:
    objects = render(helm4)
    assert not [f for f in validate_objects(objects) if f.error]
    [deployment] = [o for o in objects if o["kind"] == "Deployment" and o["metadata"]["name"].endswith("-controller")]
    pod = deployment["spec"]["template"]["spec"]
    [container] = pod["containers"]
    assert pod["serviceAccountName"] == "cozyrender-controller" and deployment["spec"]["replicas"] == 2
    assert container["command"] == ["cozyrender", "controller"]
    assert "--lease-name=cozyrender-webhook-controller" in container["args"]
    assert container["env"][0]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"  # POD_NAME: the identity
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    webhook = next(o for o in objects if o["kind"] == "Deployment" and o["metadata"]["name"] == "cozyrender-webhook")
    assert webhook["spec"]["template"]["spec"]["serviceAccountName"] == "cozyrender-webhook"
    assert deployment["spec"]["selector"] != webhook["spec"]["selector"]


def test_rbac_grows_with_the_controllers_enabled(helm4: Path) -> None:
    status_only = controller_rules(render(helm4, "--set", "controller.controllers=status"))
    assert not [r for r in status_only if "secrets" in r["resources"]]
    writes = [(r["resources"], sorted(r["verbs"])) for r in status_only if set(r["verbs"]) - {"get", "list", "watch"}]
    assert writes == [(["gpuclasses/status"], ["patch"]), (["leases"], ["create"]),
                      (["leases"], ["get", "update"])]
    lease = next(r for r in status_only if r.get("resourceNames"))
    assert lease["resourceNames"] == ["cozyrender-webhook-controller"]
    everything = render(helm4)
    secrets = [r for r in controller_rules(everything) if "secrets" in r["resources"]]
    assert {tuple(sorted(r["verbs"])) for r in secrets} == {
        ("create", "delete", "get", "list", "update", "watch"), ("get", "list", "watch")}
    [policy] = [o for o in everything if o["kind"] == "ValidatingAdmissionPolicy" and _licenses(o)]
    [binding] = [o for o in everything if o["kind"] == "ValidatingAdmissionPolicyBinding" and _licenses(o)]
    assert binding["spec"]["policyName"] == policy["metadata"]["name"] and binding["spec"]["validationActions"] == ["Deny"]
    assert policy["spec"]["failurePolicy"] == "Fail"
    assert "system:serviceaccount:cozyrender-system:cozyrender-controller" in \
        policy["spec"]["matchConditions"][0]["expression"]
    assert not [o for o in render(helm4, "--set", "controller.controllers=status")
                if o["kind"].startswith("ValidatingAdmissionPolicy") and _licenses(o)]


def _licenses(obj: dict) -> bool:
    """The license copier's policy (the webhook's own, ledger-only, is always rendered)."""
    return obj["metadata"]["name"].endswith("-license-copies")


def test_disabled_renders_nothing_of_the_controller(helm4: Path) -> None:
    objects = render(helm4, "--set", "controller.enabled=false")
    assert not controller_rules(objects)
    assert not [o for o in objects if "controller" in o["metadata"]["name"]
                or (o["kind"].startswith("ValidatingAdmission") and _licenses(o))]


def test_the_status_controller_reads_dra_objects_and_writes_none(helm4: Path) -> None:
    """A class naming a DeviceClass counts its devices: the status controller lists and watches
    DeviceClasses, ResourceSlices and ResourceClaims, and may do nothing else with them."""
    for sets in (("--set", "controller.controllers=status"), ()):
        rules = [r for r in controller_rules(render(helm4, *sets)) if r["apiGroups"] == ["resource.k8s.io"]]
        assert sorted((resource, tuple(sorted(r["verbs"]))) for r in rules for resource in r["resources"]) == [
            ("deviceclasses", ("list", "watch")), ("resourceclaims", ("list", "watch")),
            ("resourceslices", ("list", "watch"))]
    licenses_only = controller_rules(render(helm4, "--set", "controller.controllers=licenses"))
    assert not [r for r in licenses_only if r["apiGroups"] == ["resource.k8s.io"]]
