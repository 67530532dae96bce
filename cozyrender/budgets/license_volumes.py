"""The license volume a VirtualMachineInstance of a licensed vGPU class gets.

Rule (the contract, `cozyrender.gpuclass.contract`): a VirtualMachineInstance
created with a GPU of a `vgpu` class that carries `spec.license` gets, for
each such class, the class's license copy (`vgpu-license-<class>`, written by
the license copier into every entitled namespace) as a Secret volume with the
volume label `LICENSE_VOLUME_LABEL`, and a disk of the same name. KubeVirt
turns the pair into what the guest reads: virt-controller mounts the Secret
into the virt-launcher pod, and virt-launcher presents it to the guest as an
ISO disk labelled `COZY_VGPU_LIC` (`LICENSE_VOLUME_LABEL`), so a guest image finds its
`client_configuration_token.tok` and `gridd.conf` at
`/dev/disk/by-label/COZY_VGPU_LIC` whatever the VM's other disks are.

- A volume of that name, or one already naming the copy, is left as it is:
  a VMI written with the volume (by hand, or from a VM template that has it)
  is not given a second one.
- Nothing else changes: a VMI with no such GPU, or whose classes have no
  license, gets no volume. Whether the namespace is entitled is the budget
  check's question (a vGPU device outside the entitlement is refused there);
  the copy exists only where it is.
- A VMI is written once with its devices (KubeVirt refuses a change of a
  running VMI's spec), so only a CREATE is mutated.

Pure: the classes come from the caller's state; nothing here does I/O.
"""

from __future__ import annotations

from collections.abc import Mapping

from cozyrender.gpuclass.contract import LICENSE_VOLUME_LABEL
from cozyrender.gpuclass.license import copy_name, license_of

from .doors import read_door
from .holders import holder_class

VMI = "VirtualMachineInstance"


def licensed_classes(state, vmi: Mapping) -> list[str]:
    """The licensed vGPU classes of `vmi`'s GPUs, sorted (a class once)."""
    if vmi.get("kind") != VMI:
        return []
    found = set()
    for device in read_door(vmi).devices:
        name = holder_class(state, device.resource, device.dra)
        gpuclass = state.gpuclasses.get(name) if name else None
        if gpuclass is not None and license_of(gpuclass) is not None:
            found.add(name)
    return sorted(found)


def license_patch(state, vmi: Mapping) -> list[dict]:
    """A JSON Patch (RFC 6902) adding each licensed class's volume and disk
    that `vmi` lacks; empty when it lacks none. (A VMI with GPUs has
    `spec.domain.devices`, where its `gpus` are.)"""
    spec = vmi.get("spec") if isinstance(vmi.get("spec"), Mapping) else {}
    domain = spec.get("domain") if isinstance(spec.get("domain"), Mapping) else {}
    devices = domain.get("devices") if isinstance(domain.get("devices"), Mapping) else None
    if devices is None:
        return []
    volumes = [v for v in spec.get("volumes") or [] if isinstance(v, Mapping)] \
        if isinstance(spec.get("volumes"), list) else None
    has_disks = isinstance(devices.get("disks"), list)
    taken = {v.get("name") for v in volumes or []}
    mounted = {v["secret"].get("secretName") for v in volumes or [] if isinstance(v.get("secret"), Mapping)}
    patch: list[dict] = []
    for gpu_class in licensed_classes(state, vmi):
        name = copy_name(gpu_class)
        if name in taken or name in mounted:
            continue
        volume = {"name": name, "secret": {"secretName": name, "volumeLabel": LICENSE_VOLUME_LABEL}}
        disk = {"name": name, "disk": {"bus": "virtio"}}
        if volumes is None:
            patch.append({"op": "add", "path": "/spec/volumes", "value": [volume]})
            volumes = [volume]
        else:
            patch.append({"op": "add", "path": "/spec/volumes/-", "value": volume})
        if has_disks:
            patch.append({"op": "add", "path": "/spec/domain/devices/disks/-", "value": disk})
        else:
            patch.append({"op": "add", "path": "/spec/domain/devices/disks", "value": [disk]})
            has_disks = True
    return patch
