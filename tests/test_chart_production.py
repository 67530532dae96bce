"""charts/cozyrender-webhook's production settings (issue 33 items 4 and 5),
rendered by real Helm and validated against the Kubernetes 1.35 schemas:
every Deployment of the chart (the webhook's and the controller's) takes the
environment, scheduling, image and pod metadata values alike; each has a
`preStop` sleep (the kubelet's `sleep` action) inside its grace period; the
controller has a PodDisruptionBudget; bad values are refused by the chart."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from cozyrender.validate import validate_objects
from test_controller_chart import CHART, render

DIGEST = "sha256:" + "0123456789abcdef" * 4
EVERYTHING = (
    "--set", "env[0].name=KUBERNETES_SERVICE_HOST", "--set", "env[0].value=10.250.0.1",
    "--set", "nodeSelector.pool=system", "--set", "tolerations[0].key=dedicated",
    "--set", "tolerations[0].operator=Exists", "--set", "priorityClassName=platform-critical",
    "--set", "antiAffinity=required",
    "--set", "topologySpreadConstraints[0].maxSkew=1",
    "--set", "topologySpreadConstraints[0].topologyKey=topology.kubernetes.io/zone",
    "--set", "topologySpreadConstraints[0].whenUnsatisfiable=DoNotSchedule",
    "--set", "podAnnotations.example\\.com/owner=gpu-team", "--set", "podLabels.team=gpu",
    "--set", "imagePullSecrets[0].name=registry-login", "--set", f"imageDigest={DIGEST}",
)


def deployments(objects: list[dict]) -> dict[str, dict]:
    """The chart's Deployments by name: both of them, always."""
    found = {o["metadata"]["name"]: o for o in objects if o["kind"] == "Deployment"}
    assert set(found) == {"cozyrender-webhook", "cozyrender-webhook-controller"}
    return found


def test_every_deployment_takes_the_environment_and_scheduling_values_alike(helm4: Path) -> None:
    objects = render(helm4, *EVERYTHING)
    assert not [f for f in validate_objects(objects) if f.error]
    for name, deployment in deployments(objects).items():
        pod = deployment["spec"]["template"]["spec"]
        [container] = pod["containers"]
        selector = deployment["spec"]["selector"]["matchLabels"]
        assert {"name": "KUBERNETES_SERVICE_HOST", "value": "10.250.0.1"} in container["env"], name
        assert pod["nodeSelector"] == {"pool": "system"}
        assert pod["tolerations"] == [{"key": "dedicated", "operator": "Exists"}]
        assert pod["priorityClassName"] == "platform-critical"
        assert pod["imagePullSecrets"] == [{"name": "registry-login"}]
        assert container["image"] == f"ghcr.io/cozyrender/cozyrender:0.2.0@{DIGEST}"
        [term] = pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        assert term["labelSelector"]["matchLabels"] == selector  # its own replicas, not the other Deployment's
        assert "preferredDuringSchedulingIgnoredDuringExecution" not in pod["affinity"]["podAntiAffinity"]
        [spread] = pod["topologySpreadConstraints"]
        assert spread["labelSelector"] == {"matchLabels": selector}
        assert spread["topologyKey"] == "topology.kubernetes.io/zone" and spread["whenUnsatisfiable"] == "DoNotSchedule"
        metadata = deployment["spec"]["template"]["metadata"]
        assert metadata["annotations"] == {"example.com/owner": "gpu-team"}
        assert metadata["labels"] == {**selector, "team": "gpu"}
    controller = deployments(objects)["cozyrender-webhook-controller"]["spec"]["template"]["spec"]["containers"][0]
    assert controller["env"][0]["name"] == "POD_NAME"  # its identity in the Lease stays first


def test_the_defaults_spread_replicas_and_run_at_system_cluster_critical(helm4: Path) -> None:
    for deployment in deployments(render(helm4)).values():
        pod = deployment["spec"]["template"]["spec"]
        assert pod["priorityClassName"] == "system-cluster-critical"  # Gatekeeper's default
        [term] = pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
        assert term["podAffinityTerm"]["labelSelector"]["matchLabels"] == deployment["spec"]["selector"]["matchLabels"]
        assert "imagePullSecrets" not in pod and "topologySpreadConstraints" not in pod
        assert pod["containers"][0]["image"] == "ghcr.io/cozyrender/cozyrender:0.2.0"
    for deployment in deployments(render(helm4, "--set", "antiAffinity=none",
                                         "--set", "priorityClassName=")).values():
        pod = deployment["spec"]["template"]["spec"]
        assert "affinity" not in pod and "priorityClassName" not in pod


def test_a_spread_constraint_with_its_own_selector_is_kept_as_written(helm4: Path) -> None:
    objects = render(helm4, "--set", "topologySpreadConstraints[0].maxSkew=2",
                     "--set", "topologySpreadConstraints[0].topologyKey=kubernetes.io/hostname",
                     "--set", "topologySpreadConstraints[0].whenUnsatisfiable=ScheduleAnyway",
                     "--set", "topologySpreadConstraints[0].labelSelector.matchLabels.tier=gpu")
    for deployment in deployments(objects).values():
        [spread] = deployment["spec"]["template"]["spec"]["topologySpreadConstraints"]
        assert spread == {"maxSkew": 2, "topologyKey": "kubernetes.io/hostname",
                          "whenUnsatisfiable": "ScheduleAnyway", "labelSelector": {"matchLabels": {"tier": "gpu"}}}


def test_each_deployment_sleeps_in_prestop_within_its_grace_period(helm4: Path) -> None:
    objects = render(helm4)
    found = deployments(objects)
    timeout = _timeout(next(o for o in objects if o["kind"] == "ConfigMap" and o["metadata"]["name"].endswith("-webhooks")))
    for name, deployment in found.items():
        pod = deployment["spec"]["template"]["spec"]
        sleep = pod["containers"][0]["lifecycle"]["preStop"]["sleep"]["seconds"]
        assert sleep >= 1 and pod["terminationGracePeriodSeconds"] > sleep, name
    webhook = found["cozyrender-webhook"]["spec"]["template"]["spec"]
    # the sleep, the drain, then the requests in flight (each at most the API server's timeout)
    args = webhook["containers"][0]["args"]
    assert f"--timeout-seconds={timeout}" in args
    drain = int(next(a for a in args if a.startswith("--drain-seconds=")).split("=")[1])
    assert webhook["terminationGracePeriodSeconds"] >= webhook["containers"][0]["lifecycle"]["preStop"]["sleep"][
        "seconds"] + drain + timeout
    custom = deployments(render(helm4, "--set", "preStopSleepSeconds=15", "--set", "terminationGracePeriodSeconds=45",
                                "--set", "controller.preStopSleepSeconds=3",
                                "--set", "controller.terminationGracePeriodSeconds=20"))
    assert [(d["spec"]["template"]["spec"]["terminationGracePeriodSeconds"],
             d["spec"]["template"]["spec"]["containers"][0]["lifecycle"]["preStop"]["sleep"]["seconds"])
            for d in (custom["cozyrender-webhook"], custom["cozyrender-webhook-controller"])] == [(45, 15), (20, 3)]


def _timeout(configmap: dict) -> int:
    """The webhook configuration's timeoutSeconds (the longest of its webhooks), as the replicas register it."""
    from cozyrender.webhook.registration import read_configurations

    return max(h["timeoutSeconds"] for c in read_configurations(configmap["data"])
               if c["kind"] == "ValidatingWebhookConfiguration" for h in c["webhooks"])


def test_the_controller_has_a_disruption_budget_over_its_own_pods(helm4: Path) -> None:
    objects = render(helm4, "--set", "controller.maxUnavailable=1")
    budgets = {o["metadata"]["name"]: o["spec"] for o in objects if o["kind"] == "PodDisruptionBudget"}
    controller = deployments(objects)["cozyrender-webhook-controller"]
    assert budgets["cozyrender-webhook-controller"] == {
        "maxUnavailable": 1, "selector": controller["spec"]["selector"]}
    assert budgets["cozyrender-webhook"]["selector"] != controller["spec"]["selector"]
    assert not [o for o in render(helm4, "--set", "controller.enabled=false")
                if o["kind"] == "PodDisruptionBudget" and o["metadata"]["name"].endswith("-controller")]


@pytest.mark.parametrize(("values", "message"), [
    (("--set", "imageDigest=sha256:abc"), "imageDigest"),
    (("--set", "imageDigest=latest"), "imageDigest"),
    (("--set", "antiAffinity=always"), "antiAffinity"),
    (("--set", "podLabels.app\\.kubernetes\\.io/name=other"), "podLabels.app.kubernetes.io/name"),
    (("--set", "preStopSleepSeconds=0"), "preStopSleepSeconds"),
])
def test_bad_production_values_are_refused_naming_the_value(helm4: Path, values: tuple, message: str) -> None:
    proc = subprocess.run([str(helm4), "template", "cozyrender-webhook", str(CHART), "-n", "cozyrender-system",
                           *values], capture_output=True, text=True)
    assert proc.returncode != 0 and message in proc.stderr, proc.stderr


def test_the_readme_documents_every_production_value() -> None:
    readme = (CHART / "README.md").read_text()
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    for name in ("priorityClassName", "antiAffinity", "topologySpreadConstraints", "podAnnotations", "podLabels",
                 "imagePullSecrets", "imageDigest", "preStopSleepSeconds", "terminationGracePeriodSeconds",
                 "resources"):
        assert name in values and f"`{name}`" in readme, name
    assert "a standby holds nothing" in readme  # the controller's resources, documented
