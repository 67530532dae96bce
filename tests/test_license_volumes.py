"""The license volume of a licensed vGPU VMI (cozyrender.budgets.license_volumes,
the contract in cozyrender.gpuclass.contract) and the license webhook's answer
(cozyrender.webhook.mutate.licenses)."""

from __future__ import annotations

import base64
import copy
import json

from hypothesis import given, settings
from hypothesis import strategies as st
from test_budgets_builders import gpuclass
from test_budgets_doors import kvmi

from cozyrender.budgets import index_state
from cozyrender.budgets.license_volumes import license_patch, licensed_classes
from cozyrender.gpuclass.contract import LICENSE_VOLUME_LABEL
from cozyrender.webhook.mutate import licenses

A100, VG, VG2 = "nvidia.com/a100", "nvidia.com/GRID_A100-4C", "nvidia.com/GRID_A100-8C"
CLASSES = [gpuclass("a100", A100), gpuclass("a100-4c", VG, mode="vgpu"), gpuclass("a100-8c", VG2, mode="vgpu")]
UNLICENSED = gpuclass("a100-1c", "nvidia.com/GRID_A100-1C", mode="vgpu")
del UNLICENSED["spec"]["license"]
STATE = index_state([*CLASSES, UNLICENSED])


def applied(obj: dict, patch: list[dict]) -> dict:
    """`patch` (RFC 6902 adds, as this module writes them) applied to a copy of `obj`."""
    out = copy.deepcopy(obj)
    for op in patch:
        assert op["op"] == "add"
        *parents, last = op["path"].lstrip("/").split("/")
        target = out
        for part in parents:
            target = target[int(part)] if isinstance(target, list) else target[part]
        if last == "-":
            target.append(op["value"])
        else:
            assert last not in target
            target[last] = op["value"]
    return out


def test_a_licensed_vgpu_vmi_gets_its_copy_as_a_labelled_disk():
    vmi = kvmi("tenant-a", "v", [VG])
    out = applied(vmi, license_patch(STATE, vmi))
    assert out["spec"]["volumes"] == [{"name": "vgpu-license-a100-4c", "secret": {
        "secretName": "vgpu-license-a100-4c", "volumeLabel": LICENSE_VOLUME_LABEL}}]
    assert out["spec"]["domain"]["devices"]["disks"] == [{"name": "vgpu-license-a100-4c", "disk": {"bus": "virtio"}}]
    assert out["spec"]["domain"]["devices"]["gpus"] == vmi["spec"]["domain"]["devices"]["gpus"]


def test_the_label_is_an_iso9660_volume_label():
    assert len(LICENSE_VOLUME_LABEL) <= 32 and all(c.isupper() or c.isdigit() or c == "_" for c in LICENSE_VOLUME_LABEL)


def test_passthrough_unlicensed_and_unknown_devices_get_nothing():
    for devices in ([A100], ["nvidia.com/GRID_A100-1C"], ["example.com/other"], []):
        assert license_patch(STATE, kvmi("tenant-a", "v", devices)) == []


def test_each_licensed_class_once_beside_the_vmis_own_disks_and_volumes():
    vmi = kvmi("tenant-a", "v", [VG, VG2, VG])
    vmi["spec"]["domain"]["devices"]["disks"] = [{"name": "root", "disk": {"bus": "virtio"}}]
    vmi["spec"]["volumes"] = [{"name": "root", "containerDisk": {"image": "example/debian"}}]
    out = applied(vmi, license_patch(STATE, vmi))
    assert [v["name"] for v in out["spec"]["volumes"]] == ["root", "vgpu-license-a100-4c", "vgpu-license-a100-8c"]
    assert [d["name"] for d in out["spec"]["domain"]["devices"]["disks"]] == \
        ["root", "vgpu-license-a100-4c", "vgpu-license-a100-8c"]


def test_a_vmi_that_has_the_volume_already_is_not_given_a_second():
    vmi = kvmi("tenant-a", "v", [VG])
    once = applied(vmi, license_patch(STATE, vmi))
    assert license_patch(STATE, once) == []
    by_hand = kvmi("tenant-a", "w", [VG])
    by_hand["spec"]["volumes"] = [{"name": "lic", "secret": {"secretName": "vgpu-license-a100-4c"}}]
    assert license_patch(STATE, by_hand) == []


def test_a_class_in_conflict_over_its_resource_gives_the_holders_license():
    newer = gpuclass("a100-4c-copy", VG, mode="vgpu", created="2026-06-01T00:00:00Z")
    state = index_state([*CLASSES, newer])
    assert licensed_classes(state, kvmi("tenant-a", "v", [VG])) == ["a100-4c"]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from([A100, VG, VG2, "nvidia.com/GRID_A100-1C", "x.io/y"]), max_size=5),
       st.booleans(), st.booleans())
def test_the_patch_gives_exactly_the_licensed_classes_once_and_is_idempotent(devices, disks, volumes):
    vmi = kvmi("tenant-a", "v", devices)
    if disks:
        vmi["spec"]["domain"]["devices"]["disks"] = [{"name": "root", "disk": {}}]
    if volumes:
        vmi["spec"]["volumes"] = [{"name": "root", "containerDisk": {"image": "i"}}]
    out = applied(vmi, license_patch(STATE, vmi))
    wanted = sorted({f"vgpu-license-{c}" for d, c in ((VG, "a100-4c"), (VG2, "a100-8c")) if d in devices})
    secrets = [v["secret"]["secretName"] for v in out["spec"].get("volumes", []) if "secret" in v]
    assert secrets == wanted
    names = [d["name"] for d in out["spec"]["domain"]["devices"].get("disks", [])]
    assert [n for n in names if n != "root"] == wanted
    assert license_patch(STATE, out) == []


def _answer(operation: str, obj: dict, patch_for) -> dict:
    return licenses({"request": {"uid": "u", "operation": operation, "object": obj}}, patch_for)["response"]


def test_the_webhook_patches_a_create_and_admits_anything_else_unchanged():
    vmi = kvmi("tenant-a", "v", [VG])
    response = _answer("CREATE", vmi, lambda obj: license_patch(STATE, obj))
    assert response["allowed"] and response["patchType"] == "JSONPatch"
    assert json.loads(base64.b64decode(response["patch"])) == license_patch(STATE, vmi)
    for operation, obj in (("UPDATE", vmi), ("CREATE", {**vmi, "kind": "VirtualMachine"})):
        response = _answer(operation, obj, lambda obj: license_patch(STATE, obj))
        assert response == {"uid": "u", "allowed": True}


def test_the_webhook_refuses_saying_why_when_it_cannot_compute_the_patch():
    def broken(obj):
        raise ValueError("no classes")

    response = _answer("CREATE", kvmi("tenant-a", "v", [VG]), broken)
    assert not response["allowed"] and "cannot compute the license volumes: ValueError: no classes" in \
        response["status"]["message"]
