"""Every door to a GPU, against the real control plane (tools/controlplane:
kube-apiserver, etcd, two webhook replicas registered from the chart's
configurations). KubeVirt's VirtualMachine and VirtualMachineInstance are
served as CRDs generated from KubeVirt's OpenAPI (tools/kubevirt/gen_crds.py);
no virt-controller runs, so the VMIs and launcher pods KubeVirt would make
are written here as it writes them (owner references with the owner's uid).
Pods are stored and stay Pending (no node here): admission is what is tested.

DRA ResourceClaims are served by kube-apiserver itself (resource.k8s.io/v1):
the classes name DeviceClasses (`spec.deviceClassName`), and claims are
stored unallocated (no scheduler or DRA driver runs on this plane).

Each door past a spent budget is refused, within it admitted and counted
(an app written afterwards no longer fits); a pod posing as a launcher is
refused; a vGPU device in a namespace that is not entitled is refused
through every door; concurrent pod creates never over-admit; and with the
webhook down, a pod asking for no GPU and a claim of a DeviceClass no
class names are still admitted (they are never sent).
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from kubeapi import KubeAPI, apps_path
from test_webhook_live import APPS, ledger_entries, make_tenant, wait_until_cached, webhooks_down

PASSTHROUGH, VGPU = "l40", "l40-2q"
L40 = "nvidia.com/l40"
L40_2Q = "nvidia.com/GRID_L40-2Q"
KEY = f"{PASSTHROUGH}.gpuclass.cozystack.io/devices"
# The DeviceClasses the classes offer through DRA (the node's driver is gpu.cozyrender.io).
DRA, VGPU_DRA = "gpu.cozyrender.io", "vgpu.cozyrender.io"


@pytest.fixture(scope="module")
def api(cluster) -> KubeAPI:
    api = KubeAPI(cluster)
    for name, spec in (
        (PASSTHROUGH, {"mode": "passthrough", "sourceKind": "PCIHostDevice", "resourceName": L40,
                       "deviceClassName": DRA}),
        (VGPU, {"mode": "vgpu", "sourceKind": "MediatedDevice", "resourceName": L40_2Q, "profile": "L40-2Q",
                "deviceClassName": VGPU_DRA,
                "license": {"secretRef": {"namespace": "cozy-system", "name": "nvidia-license"}, "featureType": 1}}),
    ):
        status, body = api.create("/apis/cozystack.io/v1alpha1/gpuclasses", {
            "apiVersion": "cozystack.io/v1alpha1", "kind": "GPUClass", "metadata": {"name": name},
            "spec": {"vendor": "nvidia", "model": "L40", "memory": "48Gi", **spec}})
        assert status in (201, 409), body
    # Which devices are GPUs is the classes' to say: the replicas must hold them before a door is decided.
    status, body = api.get("/apis/cozystack.io/v1alpha1/gpuclasses")
    wait_until_cached(cluster, "GPUClass", len(body["items"]))
    wait_until_registered(api, [DRA, VGPU_DRA])
    return api


def wait_until_registered(api: KubeAPI, device_classes: list[str], timeout: float = 20.0) -> None:
    """Until the registered claims webhook is sent the claims of `device_classes` (the replicas
    write its condition from the classes they hold: cozyrender.webhook.registration)."""
    from cluster import WEBHOOK_RELEASE

    deadline = time.monotonic() + timeout
    while True:
        status, body = api.get(f"/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/{WEBHOOK_RELEASE}")
        hooks = {hook["name"]: hook for hook in body.get("webhooks", [])} if status == 200 else {}
        hook = hooks.get("resourceclaims.budgets.cozyrender.io", {})
        expression = " ".join(c["expression"] for c in hook.get("matchConditions", []))
        if all(f"'{name}'" in expression for name in device_classes):
            return
        assert time.monotonic() < deadline, f"the claims webhook is not sent {device_classes}: {expression!r}"
        time.sleep(0.1)


def tenant(api: KubeAPI, name: str, quotas: dict) -> str:
    """`make_tenant`, and the namespace's default ServiceAccount (no controller manager makes it here)."""
    namespace = make_tenant(api, name, quotas)
    status, body = api.create(f"/api/v1/namespaces/{namespace}/serviceaccounts",
                              {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}})
    assert status in (201, 409), body
    return namespace


def pod(namespace: str, name: str, devices: dict[str, int], owner: dict | None = None,
        init: dict[str, int] | None = None) -> dict:
    meta: dict = {"name": name, "namespace": namespace}
    if owner is not None:
        meta["ownerReferences"] = [{**owner, "controller": True}]
        meta["labels"] = {"kubevirt.io": "virt-launcher"}
    spec: dict = {"containers": [{"name": "compute", "image": "registry.invalid/none",
                                  "resources": {"limits": {k: str(v) for k, v in devices.items()}}}]}
    if init:
        spec["initContainers"] = [{"name": "setup", "image": "registry.invalid/none",
                                   "resources": {"limits": {k: str(v) for k, v in init.items()}}}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def devices(gpus: list[str], host: list[str] | None = None) -> dict:
    found: dict = {"gpus": [{"name": f"gpu{i}", "deviceName": d} for i, d in enumerate(gpus)]}
    if host:
        found["hostDevices"] = [{"name": f"host{i}", "deviceName": d} for i, d in enumerate(host)]
    return found


def vm(namespace: str, name: str, gpus: list[str], host: list[str] | None = None,
       annotations: dict | None = None) -> dict:
    meta: dict = {"name": name, "namespace": namespace}
    if annotations:
        meta["annotations"] = annotations
    return {"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine", "metadata": meta,
            "spec": {"runStrategy": "Halted", "template": {"spec": {"domain": {"devices": devices(gpus, host)}}}}}


def vmi(namespace: str, name: str, gpus: list[str], owner: dict | None = None) -> dict:
    meta: dict = {"name": name, "namespace": namespace}
    if owner is not None:
        meta["ownerReferences"] = [{**owner, "controller": True}]
    return {"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance", "metadata": meta,
            "spec": {"domain": {"devices": devices(gpus)}}}


def claim(namespace: str, name: str, count: int, device_class: str = DRA) -> dict:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": name, "namespace": namespace},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": device_class,
                                                                          "count": count}}]}}}


def claims_path(namespace: str, plural: str = "resourceclaims") -> str:
    return f"/apis/resource.k8s.io/v1/namespaces/{namespace}/{plural}"


def pods_path(namespace: str, name: str | None = None) -> str:
    return f"/api/v1/namespaces/{namespace}/pods" + (f"/{name}" if name else "")


def kubevirt_path(plural: str, namespace: str, name: str | None = None) -> str:
    return f"/apis/kubevirt.io/v1/namespaces/{namespace}/{plural}" + (f"/{name}" if name else "")


def owner_of(body: dict) -> dict:
    return {"apiVersion": body["apiVersion"], "kind": body["kind"], "name": body["metadata"]["name"],
            "uid": body["metadata"]["uid"]}


def refused(status: int, body: dict, *words: str) -> None:
    assert status == 403, f"{status}: {body.get('message', body)}"
    for word in words:
        assert word in body["message"], body["message"]


def test_a_pod_past_a_spent_budget_is_refused_and_one_within_is_counted(cluster, api) -> None:
    namespace = tenant(api, "podder", {KEY: 4})
    status, body = api.create(pods_path(namespace), pod(namespace, "train", {L40: 3}))
    assert status == 201, body.get("message", body)
    status, body = api.create(pods_path(namespace), pod(namespace, "more", {L40: 2}))
    refused(status, body, "exceeded GPU budget", "requested 2, reserved 3", "budget 4")
    # Init containers count as Kubernetes counts them: the larger of the init phase and the sum.
    status, body = api.create(pods_path(namespace), pod(namespace, "init", {L40: 0}, init={L40: 2}))
    refused(status, body, "requested 2, reserved 3")
    status, body = api.create(pods_path(namespace), pod(namespace, "one", {L40: 1}))
    assert status == 201, body.get("message", body)
    # The pods are counted: an app asking for one more device no longer fits.
    status, body = api.create(apps_path("vminstances", namespace), {
        "apiVersion": APPS, "kind": "VMInstance", "metadata": {"name": "app", "namespace": namespace},
        "spec": {"gpus": [{"class": PASSTHROUGH, "count": 1}]}})
    refused(status, body, "requested 1, reserved 4")


def test_a_claim_past_a_spent_budget_is_refused_and_one_within_is_counted(cluster, api) -> None:
    namespace = tenant(api, "claimer", {KEY: 4})
    status, body = api.create(claims_path(namespace), claim(namespace, "train", 3))
    assert status == 201, body.get("message", body)
    # Reserved in the pool's ledger shard until the replicas see it stored (its devices, as projected).
    [entry] = [e for e in ledger_entries(api, namespace) if e["identity"][1:] == ["ResourceClaim", namespace, "train"]]
    assert entry["object"]["spec"]["devices"]["requests"] == [
        {"name": "r0", "exactly": {"deviceClassName": DRA, "count": 3}}], entry
    status, body = api.create(claims_path(namespace), claim(namespace, "more", 2))
    refused(status, body, "exceeded GPU budget", "requested 2, reserved 3", "budget 4")
    # allocationMode All is 32 devices, as Kubernetes' quota counts it.
    everything = claim(namespace, "all", 1)
    everything["spec"]["devices"]["requests"][0]["exactly"] = {"deviceClassName": DRA, "allocationMode": "All"}
    status, body = api.create(claims_path(namespace), everything)
    refused(status, body, "requested 32, reserved 3")
    status, body = api.create(claims_path(namespace), claim(namespace, "one", 1))
    assert status == 201, body.get("message", body)
    # The claims are counted: a pod asking for one more device no longer fits.
    status, body = api.create(pods_path(namespace), pod(namespace, "p", {L40: 1}))
    refused(status, body, "requested 1, reserved 4")


def test_virtual_machines_and_instances_are_charged_once(cluster, api) -> None:
    namespace = tenant(api, "kubevirt", {KEY: 2})
    status, machine = api.create(kubevirt_path("virtualmachines", namespace), vm(namespace, "a", [L40, L40]))
    assert status == 201, machine
    status, body = api.create(kubevirt_path("virtualmachines", namespace), vm(namespace, "b", [], host=[L40]))
    refused(status, body, "exceeded GPU budget", "requested 1, reserved 2", "budget 2",
            "spec.template.spec.domain.devices.hostDevices[0].deviceName")
    # The VMI KubeVirt makes for VM a is a's: admitted and not charged again.
    status, instance = api.create(kubevirt_path("virtualmachineinstances", namespace),
                                  vmi(namespace, "a", [L40, L40], owner_of(machine)))
    assert status == 201, instance
    # A VMI of its own is charged: the budget is spent.
    status, body = api.create(kubevirt_path("virtualmachineinstances", namespace), vmi(namespace, "solo", [L40]))
    refused(status, body, "requested 1, reserved 2")
    # One claiming VM a with another uid, or more devices than a holds, is refused, naming why.
    status, body = api.create(kubevirt_path("virtualmachineinstances", namespace),
                              vmi(namespace, "a2", [L40], {**owner_of(machine), "name": "a", "uid": "0000"}))
    refused(status, body, "with uid '0000'")
    # Its launcher pod is the VMI's: admitted, not charged; a pod posing as one is refused.
    status, body = api.create(pods_path(namespace), pod(namespace, "virt-launcher-a-x", {L40: 2}, owner_of(instance)))
    assert status == 201, body.get("message", body)
    status, body = api.create(pods_path(namespace), pod(namespace, "virt-launcher-a-y", {L40: 1}, owner_of(instance)))
    refused(status, body, "more devices of class 'l40' than VirtualMachineInstance", "held by its other claimants 2")
    status, body = api.create(pods_path(namespace), pod(namespace, "virt-launcher-ghost", {L40: 1},
                                                        {**owner_of(instance), "name": "ghost"}))
    refused(status, body, "VirtualMachineInstance", "ghost, which does not exist")
    # The VMInstance app of the same tenant no longer fits either.
    status, body = api.create(apps_path("vminstances", namespace), {
        "apiVersion": APPS, "kind": "VMInstance", "metadata": {"name": "app", "namespace": namespace},
        "spec": {"gpus": [{"class": PASSTHROUGH, "count": 1}]}})
    refused(status, body, "requested 1, reserved 2")


def test_an_apps_vm_is_not_charged_twice_and_cannot_take_more(cluster, api) -> None:
    namespace = tenant(api, "apped", {KEY: 2})
    status, body = api.create(apps_path("vminstances", namespace), {
        "apiVersion": APPS, "kind": "VMInstance", "metadata": {"name": "web", "namespace": namespace},
        "spec": {"gpus": [{"class": PASSTHROUGH, "count": 2}]}})
    assert status == 201, body.get("message", body)
    claim = {"gpuclass.cozystack.io/app": "VMInstance/web"}
    status, body = api.create(kubevirt_path("virtualmachines", namespace),
                              vm(namespace, "vm-instance-web", [L40, L40], annotations=claim))
    assert status == 201, body.get("message", body)
    # A second VM claiming the same app finds its devices taken.
    status, body = api.create(kubevirt_path("virtualmachines", namespace),
                              vm(namespace, "copy", [L40], annotations=claim))
    refused(status, body, "VMInstance", "web holds", "held by its other claimants 2")
    status, body = api.create(kubevirt_path("virtualmachines", namespace),
                              vm(namespace, "fake", [L40], annotations={"gpuclass.cozystack.io/app": "VMInstance/none"}))
    refused(status, body, "VMInstance", "none, which does not exist")


def test_a_vgpu_device_outside_the_entitlement_is_refused_through_every_door(cluster, api) -> None:
    namespace = tenant(api, "unentitled", {"gpuclass.cozystack.io/devices": 8})
    for path, body in (
        (pods_path(namespace), pod(namespace, "p", {L40_2Q: 1})),
        (kubevirt_path("virtualmachines", namespace), vm(namespace, "v", [L40_2Q])),
        (kubevirt_path("virtualmachineinstances", namespace), vmi(namespace, "i", [L40_2Q])),
        (claims_path(namespace), claim(namespace, "c", 1, VGPU_DRA)),
        (claims_path(namespace, "resourceclaimtemplates"), {
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": "t", "namespace": namespace}, "spec": {"spec": claim(namespace, "t", 1, VGPU_DRA)["spec"]}}),
    ):
        status, answer = api.create(path, body)
        refused(status, answer, f"GPU class '{VGPU}' is a vGPU class", f"{namespace} is not entitled to vGPU")


def test_concurrent_pod_creates_never_over_admit(cluster, api) -> None:
    namespace = tenant(api, "racer", {KEY: 4})
    with ThreadPoolExecutor(max_workers=10) as pool:
        answers = list(pool.map(lambda i: api.create(pods_path(namespace), pod(namespace, f"p{i}", {L40: 1})),
                                range(10)))
    admitted = [body for status, body in answers if status == 201]
    assert len(admitted) == 4, [(s, b.get("message")) for s, b in answers]
    status, body = api.get(pods_path(namespace))
    assert len(body["items"]) == 4


def test_with_the_webhook_down_a_pod_or_claim_without_gpus_is_admitted(cluster, api) -> None:
    namespace = tenant(api, "outage", {KEY: 4})
    with webhooks_down(cluster):
        plain = pod(namespace, "plain", {})
        plain["spec"]["containers"][0]["resources"] = {"limits": {"cpu": "1", "memory": "1Gi"}}
        status, body = api.create(pods_path(namespace), plain)
        assert status == 201, body.get("message", body)
        status, body = api.create(pods_path(namespace), pod(namespace, "gpu", {L40: 1}))
        assert status >= 500 and "pods.budgets.cozyrender.io" in body["message"], body
        assert "failed calling webhook" in body["message"], body
        # A claim of a DeviceClass no GPUClass names is never sent; one of a class's is, and fails closed.
        status, body = api.create(claims_path(namespace), claim(namespace, "fpga", 2, "fpga.example.com"))
        assert status == 201, body.get("message", body)
        status, body = api.create(claims_path(namespace), claim(namespace, "gpu", 1))
        assert status >= 500 and "resourceclaims.budgets.cozyrender.io" in body["message"], body


def test_a_licensed_vgpu_vmi_is_given_its_license_disk_which_the_api_server_keeps(cluster, api) -> None:
    """The license webhook (licenses.cozyrender.io, the contract's license volume): registered
    from the chart with the other configurations, it answers a licensed vGPU VMI's CREATE
    with a JSON Patch adding the class's license copy as a labelled Secret volume and disk;
    applied by the real API server to a VMI of KubeVirt's schema (in a namespace no webhook
    is sent), the stored VMI holds both as the contract says (nothing pruned)."""
    import base64
    import json
    import ssl
    import urllib.request

    import yaml

    status, registered = api.get("/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/"
                                 "cozyrender-webhook")
    assert status == 200, registered
    [hook] = [h for h in registered["webhooks"] if h["name"] == "licenses.cozyrender.io"]
    assert hook["rules"][0]["resources"] == ["virtualmachineinstances"] and hook["failurePolicy"] == "Fail"
    body = vmi("default", "licensed", [L40_2Q])
    callers = yaml.safe_load((cluster.pki / "webhook-callers" / "kubeconfig").read_text())["users"][0]["user"]
    context = ssl.create_default_context(cafile=str(cluster.pki / "ca.crt"))
    context.load_cert_chain(callers["client-certificate"], callers["client-key"])
    review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
              "request": {"uid": "license", "operation": "CREATE", "namespace": "default", "object": body,
                          "kind": {"group": "kubevirt.io", "version": "v1", "kind": "VirtualMachineInstance"}}}
    request = urllib.request.Request(f"https://127.0.0.1:{cluster.ports['webhook-0']}/mutate-licenses",
                                     json.dumps(review).encode(), {"Content-Type": "application/json"})
    response = json.loads(urllib.request.urlopen(request, context=context, timeout=10).read())["response"]
    assert response["allowed"] and response["patchType"] == "JSONPatch", response
    patch = json.loads(base64.b64decode(response["patch"]))
    status, created = api.create(kubevirt_path("virtualmachineinstances", "default"), body)
    assert status == 201, created
    status, patched = api.request("PATCH", kubevirt_path("virtualmachineinstances", "default", "licensed"), patch,
                                  content_type="application/json-patch+json")
    assert status == 200, patched
    name = f"vgpu-license-{VGPU}"
    assert patched["spec"]["volumes"] == [{"name": name, "secret": {"secretName": name, "volumeLabel": "COZY_VGPU_LIC"}}]
    assert patched["spec"]["domain"]["devices"]["disks"] == [{"name": name, "disk": {"bus": "virtio"}}]
    assert patched["spec"]["domain"]["devices"]["gpus"] == body["spec"]["domain"]["devices"]["gpus"]
