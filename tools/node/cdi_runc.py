"""The CDI step of a container runtime, for the test node's containerd 1.6, which has none.

A stand-in: containerd 1.7 and later apply the CDI device IDs the kubelet passes for a container
(the CRI's `CDIDevices`, from a DRA driver's NodePrepareResources) by reading the CDI spec files
and editing the container's OCI spec; Debian bookworm's containerd 1.6 drops them. This OCI
runtime sits in front of runc (containerd's `BinaryName` for runc, only on a node with the DRA
driver) and does that step from what the node has on disk.

Rule: on `create` of a pod's container (not its sandbox), the pod (the kubelet's
`<kubelet root>/pods/<uid>/` in the container's mount sources) is looked up in the kubelet's
own DRA checkpoint (`<kubelet root>/dra_manager_state`); the CDI device IDs of every claim
prepared for that pod are resolved in the CDI spec files of the CDI folder (`<kind>=<name>`: the
spec of that kind with a device of that name), and their `containerEdits.env` are added to the
bundle's config.json. Only `env` edits are applied (all the test driver writes). The kubelet
does not say which of the pod's containers uses which claim, so every container of the pod gets
every claim's devices (containerd applies only the ones its container asked for). Then runc runs
with the same arguments. Whatever it cannot read leaves the bundle as it was: a container is
never refused here.

    cdi_runc.py --runc PATH --cdi-dir DIR --kubelet-dir DIR -- RUNC_ARGS...
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

POD = re.compile(r"/pods/([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})/")


def bundle_of(args: list[str]) -> Path | None:
    """The bundle of a `runc ... create --bundle DIR ... ID` call; None for any other call."""
    if "create" not in args:
        return None
    rest = args[args.index("create") + 1:]
    for i, arg in enumerate(rest):
        if arg in ("--bundle", "-b") and i + 1 < len(rest):
            return Path(rest[i + 1])
        if arg.startswith("--bundle="):
            return Path(arg.split("=", 1)[1])
    return Path.cwd()


def pod_uid(spec: dict, kubelet_dir: Path) -> str | None:
    for mount in spec.get("mounts") or []:
        source = mount.get("source") or ""
        match = POD.search(source)
        if source.startswith(f"{kubelet_dir}/") and match:
            return match.group(1)
    return None


def cdi_ids(checkpoint: Path, uid: str) -> list[str]:
    """The CDI device IDs of the claims the kubelet prepared for the pod `uid`."""
    data = json.loads(json.loads(checkpoint.read_text())["Data"])
    claims = data.get("ClaimInfoStateList") or []
    return [cdi for claim in claims if uid in (claim.get("PodUIDs") or {})
            for driver in (claim.get("DriverState") or {}).values()
            for device in driver.get("Devices") or [] for cdi in device.get("CDIDeviceIDs") or []]


def env_edits(cdi_dir: Path, ids: list[str]) -> list[str]:
    devices = {}
    for file in sorted(cdi_dir.glob("*.json")):
        spec = json.loads(file.read_text())
        for device in spec.get("devices") or []:
            devices[f"{spec['kind']}={device['name']}"] = (device.get("containerEdits") or {}).get("env") or []
    return [env for cdi in ids for env in devices.get(cdi, [])]


def inject(bundle: Path, cdi_dir: Path, kubelet_dir: Path) -> None:
    config = bundle / "config.json"
    spec = json.loads(config.read_text())
    annotations = spec.get("annotations") or {}
    if annotations.get("io.kubernetes.cri.container-type") != "container":
        return
    uid = pod_uid(spec, kubelet_dir)
    checkpoint = kubelet_dir / "dra_manager_state"
    if uid is None or not checkpoint.exists():
        return
    edits = env_edits(cdi_dir, cdi_ids(checkpoint, uid))
    if edits:
        process = spec.setdefault("process", {})
        process["env"] = list(process.get("env") or []) + edits
        config.write_text(json.dumps(spec))


def main(argv: list[str]) -> None:
    split = argv.index("--")
    options, args = argv[:split], argv[split + 1:]
    value = {options[i]: options[i + 1] for i in range(0, len(options) - 1, 2)}
    runc = value["--runc"]
    bundle = bundle_of(args)
    if bundle is not None:
        try:
            inject(bundle, Path(value["--cdi-dir"]), Path(value["--kubelet-dir"]))
        except Exception as err:  # noqa: BLE001 - never refuse a container here
            print(f"cdi_runc: left {bundle} as it was: {err}", file=sys.stderr)
    os.execv(runc, [runc, *args])


if __name__ == "__main__":
    main(sys.argv[1:])
