"""The contract between the pieces that hand out a GPU: what an app's chart
writes on the VirtualMachines it renders, what the VMI and launcher pod
checks read, and what the license copier writes (its names are in
`cozyrender.gpuclass.license`). Each later piece is written and reviewed
against this one description (the seed: "the package comment states that
contract next to the names it uses").

The names:

- `APP_ANNOTATION` (`gpuclass.cozystack.io/app`), value `<Kind>/<name>`:
  written by an app's chart (VMInstance, KubernetesNodes, Kubernetes of
  `apps.cozystack.io`) on every VirtualMachine it renders, in the VM's own
  metadata and in `spec.template.metadata` (so the VirtualMachineInstance
  KubeVirt makes carries it too). It says: this VM's devices are the ones
  the app `<Kind>/<name>` of the same namespace reserved, already checked
  against the budget; do not charge them again. The claim is checked, not
  trusted: the devices of every VM and VMI claiming one app together, class
  by class, may not exceed what the app reserves, so a tenant writing the
  annotation on VMs of its own gets no device the app did not pay for.
- `APP_LABEL` (`gpuclass.cozystack.io/app-devices: "true"`), beside the
  annotation in the same two places: a selector for the objects whose
  devices an app holds (monitoring, `kubectl get vm -l`); the annotation,
  not the label, is what the checks read.
- The `gpus` entry names: a GPU of class C is a `gpus[]` (or `hostDevices[]`)
  entry whose `deviceName` is C's `spec.resourceName`; the entry's `name`
  is free (Cozystack's chart writes `gpu1`, `gpu2`, ...).
- Ownership, as KubeVirt writes it: a VirtualMachineInstance made for a
  VirtualMachine has the VM's name and a controller owner reference to it
  (kind VirtualMachine, the VM's uid); a virt-launcher pod has a controller
  owner reference to its VMI (kind VirtualMachineInstance, the VMI's uid)
  and the label `kubevirt.io: virt-launcher`. A VMI or pod whose devices
  are its owner's is not charged again; one claiming an owner that does not
  exist, has another uid, or holds fewer devices is refused.
- The license copy (`cozyrender.gpuclass.license`): `vgpu-license-<class>`
  in every entitled namespace, keys `client_configuration_token.tok` and
  `gridd.conf`, the names NVIDIA's guest driver and the GPU Operator's
  licensing configuration read.
- The license volume (`cozyrender.budgets.license_volumes`, written by the
  VMI webhook `licenses.cozyrender.io`): a VirtualMachineInstance created
  with a GPU of a licensed vGPU class gets the copy as a Secret volume and a
  disk, both named `vgpu-license-<class>`, the volume labelled
  `LICENSE_VOLUME_LABEL` (`COZY_VGPU_LIC`). KubeVirt mounts it into the
  virt-launcher pod and gives it to the guest as an ISO disk of that label:
  a guest image looks for `/dev/disk/by-label/COZY_VGPU_LIC`, copies
  `client_configuration_token.tok` to `/etc/nvidia/ClientConfigToken/` and
  `gridd.conf` to `/etc/nvidia/`.

Names only, no I/O.
"""

from __future__ import annotations

APP_ANNOTATION = "gpuclass.cozystack.io/app"
APP_LABEL = "gpuclass.cozystack.io/app-devices"
APP_LABEL_VALUE = "true"
LAUNCHER_LABEL = "kubevirt.io"
LAUNCHER_LABEL_VALUE = "virt-launcher"
LICENSE_VOLUME_LABEL = "COZY_VGPU_LIC"  # an ISO 9660 volume label: A-Z, 0-9 and _, at most 32


def app_reference(kind: str, name: str) -> str:
    """The annotation's value for app `kind`/`name` (same namespace)."""
    return f"{kind}/{name}"
