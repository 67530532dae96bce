"""cozyrender.webhook.registration's decisions (pure): what one replica registers
from the chart's `<release>-webhooks` ConfigMap, and what it deletes. The live
half (a replica that never starts registers nothing; uninstalling deletes what
was registered) is tests/test_webhook_install.py."""

from __future__ import annotations

import pytest
import yaml

from cozyrender.webhook.registration import RegistrationError, plan, read_configurations

OWNER = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "name": "w-read", "uid": "u1",
         "blockOwnerDeletion": False}


def configuration(kind: str, path: str, ca: str | None = None, url: bool = False) -> dict:
    client = {"url": f"https://127.0.0.1:1{path}"} if url else {"service": {"name": "w", "namespace": "n",
                                                                          "path": path, "port": 443}}
    if ca:
        client["caBundle"] = ca
    return {"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind, "metadata": {"name": "w"},
            "webhooks": [{"name": "x.cozyrender.io", "clientConfig": client}]}


VALIDATING = configuration("ValidatingWebhookConfiguration", "/validate")
MUTATING = configuration("MutatingWebhookConfiguration", "/mutate")


def test_a_replica_registers_what_it_serves_owned_by_the_role():
    decided = plan([VALIDATING, MUTATING], ["/validate", "/mutate"], OWNER, None)
    assert [c["kind"] for c in decided.apply] == ["ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"]
    assert all(c["metadata"]["ownerReferences"] == [OWNER] for c in decided.apply)
    assert decided.delete == [] and decided.skipped == []
    assert "ownerReferences" not in VALIDATING["metadata"]  # the input is not changed


def test_a_replica_without_mutate_leaves_the_mutating_configuration_alone():
    """An old replica during the upgrade that turns injection on: it neither registers
    the MutatingWebhookConfiguration (it would answer /mutate with 404) nor deletes it."""
    decided = plan([VALIDATING, MUTATING], ["/validate"], OWNER, None)
    assert [c["kind"] for c in decided.apply] == ["ValidatingWebhookConfiguration"]
    assert decided.skipped == ["MutatingWebhookConfiguration w"] and decided.delete == []


def test_injection_turned_off_deletes_the_mutating_configuration():
    decided = plan([VALIDATING], ["/validate", "/mutate"], OWNER, None)
    assert decided.delete == [("MutatingWebhookConfiguration", "w")]
    assert [c["kind"] for c in decided.apply] == ["ValidatingWebhookConfiguration"]


def test_the_ca_fills_only_a_missing_bundle():
    decided = plan([VALIDATING, configuration("MutatingWebhookConfiguration", "/mutate", ca="Q0E=")],
                   ["/validate", "/mutate"], OWNER, "UEVN")
    bundles = [c["webhooks"][0]["clientConfig"]["caBundle"] for c in decided.apply]
    assert bundles == ["UEVN", "Q0E="]


def test_url_mode_paths_are_read_from_the_url():
    decided = plan([configuration("ValidatingWebhookConfiguration", "/validate", url=True)], ["/mutate"], OWNER, None)
    assert decided.apply == [] and decided.skipped == ["ValidatingWebhookConfiguration w"]


def test_the_configmap_is_read_strictly():
    data = {"validating.yaml": yaml.safe_dump(VALIDATING), "mutating.yaml": yaml.safe_dump(MUTATING)}
    assert [c["kind"] for c in read_configurations(data)] == ["MutatingWebhookConfiguration",
                                                               "ValidatingWebhookConfiguration"]
    for bad in ("a: [", yaml.safe_dump({"kind": "ConfigMap", "metadata": {"name": "x"}}),
                yaml.safe_dump({"kind": "ValidatingWebhookConfiguration"})):
        with pytest.raises(RegistrationError):
            read_configurations({"validating.yaml": bad})


def test_the_chart_renders_what_the_replicas_read(helm4):
    """The chart's ConfigMap holds exactly the configurations, parsed the way the replicas parse it."""
    import subprocess

    from tests.conftest import ROOT

    out = subprocess.run([str(helm4), "template", "w", str(ROOT / "charts" / "cozyrender-webhook"), "-n", "n",
                          "--set", "fluxInjection=true"], capture_output=True, text=True, check=True).stdout
    [source] = [d for d in yaml.safe_load_all(out) if d and d["metadata"]["name"] == "w-webhooks"]
    found = read_configurations(source["data"])
    decided = plan(found, ["/validate", "/mutate-licenses", "/mutate"], OWNER, "UEVN")
    assert sorted(c["kind"] for c in decided.apply) == ["MutatingWebhookConfiguration",
                                                         "ValidatingWebhookConfiguration"]
    assert decided.delete == []


def test_the_replicas_are_the_only_writer_of_the_ca_bundle():
    """A configuration asking cert-manager's cainjector to inject (an older chart rendered the
    annotation) is registered without the request, so cainjector never force-applies a bundle
    over the replicas' (and they over its, every pass), whatever the two read."""
    asking = configuration("ValidatingWebhookConfiguration", "/validate")
    asking["metadata"]["annotations"] = {"cert-manager.io/inject-ca-from": "n/w-tls", "team": "gpu"}
    only = configuration("MutatingWebhookConfiguration", "/mutate")
    only["metadata"]["annotations"] = {"cert-manager.io/inject-ca-from": "n/w-tls"}
    decided = plan([asking, only], ["/validate", "/mutate"], OWNER, "UEVN")
    assert [c["metadata"].get("annotations") for c in decided.apply] == [{"team": "gpu"}, None]
    assert [c["webhooks"][0]["clientConfig"]["caBundle"] for c in decided.apply] == ["UEVN", "UEVN"]
    assert asking["metadata"]["annotations"]["cert-manager.io/inject-ca-from"] == "n/w-tls"  # input kept


def test_the_ca_file_is_read_again_at_each_pass(tmp_path):
    """The serving Secret's ca.crt as the kubelet keeps it: a renewed CA is what the next
    registration pass writes, not the one the replica started with."""
    import base64

    from cozyrender.webhook.registration import ca_bundle_file

    path = tmp_path / "ca.crt"
    read = ca_bundle_file(str(path))
    assert read() is None  # no Secret mounted yet
    first = b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"
    path.write_bytes(first)
    assert base64.b64decode(read()) == first
    renewed = b"-----BEGIN CERTIFICATE-----\nBBBB\n-----END CERTIFICATE-----\n"
    path.write_bytes(renewed)
    assert base64.b64decode(read()) == renewed
    path.write_bytes(b"not a certificate")
    assert read() is None


def test_the_dra_webhooks_are_sent_only_the_gpu_device_classes(helm4):
    """The chart renders the DRA webhooks' `gpu-device-classes` condition as `false` (nothing is
    sent); each replica writes it from the DeviceClasses the GPUClasses name."""
    import subprocess

    from tests.conftest import ROOT

    out = subprocess.run([str(helm4), "template", "w", str(ROOT / "charts" / "cozyrender-webhook"), "-n", "n"],
                         capture_output=True, text=True, check=True).stdout
    [source] = [d for d in yaml.safe_load_all(out) if d and d["metadata"]["name"] == "w-webhooks"]
    found = read_configurations(source["data"])

    def conditions(device_classes) -> dict:
        [validating] = plan(found, ["/validate"], OWNER, None, device_classes).apply
        return {hook["name"]: {c["name"]: c["expression"] for c in hook.get("matchConditions", [])}
                for hook in validating["webhooks"]}

    unset = conditions([])
    assert unset["resourceclaims.budgets.cozyrender.io"]["gpu-device-classes"] == "false"
    assert unset["resourceclaimtemplates.budgets.cozyrender.io"]["gpu-device-classes"] == "false"
    named = conditions(["gpu.example.com", "a.example.com", "gpu.example.com"])
    claims = named["resourceclaims.budgets.cozyrender.io"]["gpu-device-classes"]
    assert claims.count("['a.example.com', 'gpu.example.com']") == 2 and "object.spec.devices.requests" in claims
    templates = named["resourceclaimtemplates.budgets.cozyrender.io"]["gpu-device-classes"]
    assert "object.spec.spec.devices.requests" in templates
    # The other webhooks are left as the chart renders them.
    assert named["pods.budgets.cozyrender.io"] == unset["pods.budgets.cozyrender.io"]
    assert "gpu-device-classes" not in named["budgets.cozyrender.io"]


def test_a_device_class_condition_on_another_resource_is_refused():
    hook = {"name": "x", "rules": [{"resources": ["pods"]}], "matchConditions": [
        {"name": "gpu-device-classes", "expression": "false"}], "clientConfig": {"service": {"path": "/validate"}}}
    configuration = {**VALIDATING, "webhooks": [hook]}
    with pytest.raises(RegistrationError, match="gpu-device-classes"):
        plan([configuration], ["/validate"], OWNER, None, ["gpu.example.com"])
