"""Run an image built by tools/image/build.py with runc, without a container engine.

`unpack(layout, tag, bundle)` unpacks the OCI layout with umoci (which also checks it: digests,
media types) into `<bundle>/rootfs` plus umoci's runtime spec; `Container` writes a spec for one
run (arguments, read-only root, bind mounts, host network or the spec's own network namespace)
beside a shared root filesystem and runs it as `runc run` in the foreground, under a runc state
folder of its own, so `delete()` removes only what it started.
"""

from __future__ import annotations

import copy
import json
import subprocess
from pathlib import Path


def unpack(layout: Path, tag: str, bundle: Path) -> dict:
    """umoci unpack; returns the generated runtime spec (the image's user, entrypoint, env)."""
    result = subprocess.run(["umoci", "unpack", "--image", f"{layout}:{tag}", str(bundle)],
                            capture_output=True, text=True, timeout=600)
    if result.returncode != 0:
        raise RuntimeError(f"umoci unpack {layout}:{tag}: {result.stderr.strip()}")
    return json.loads((bundle / "config.json").read_text())


class Container:
    def __init__(self, name: str, spec: dict, rootfs: Path, folder: Path, args: list[str],
                 mounts: tuple[tuple[str, str], ...] = (), host_network: bool = False) -> None:
        self.name = name
        self.folder = folder
        self.state = folder / "runc-state"
        spec = copy.deepcopy(spec)
        process = spec["process"]
        process["args"] = [*process["args"][:1], *args] if process["args"] else args
        process["terminal"] = False
        spec["root"] = {"path": str(rootfs), "readonly": True}
        spec["hostname"] = name
        spec["mounts"] = [*spec["mounts"], *[
            {"destination": target, "source": source, "type": "bind", "options": ["rbind", "ro"]}
            for source, target in mounts]]
        if host_network:
            spec["linux"]["namespaces"] = [n for n in spec["linux"]["namespaces"] if n["type"] != "network"]
        self.bundle = folder / name
        self.bundle.mkdir(parents=True, exist_ok=True)
        (self.bundle / "config.json").write_text(json.dumps(spec))

    def argv(self) -> list[str]:
        return ["runc", "--root", str(self.state), "run", "--bundle", str(self.bundle), self.name]

    def run(self, timeout: float = 120) -> subprocess.CompletedProcess:
        try:
            return subprocess.run(self.argv(), capture_output=True, text=True, timeout=timeout,
                                  stdin=subprocess.DEVNULL)
        finally:
            self.delete()

    def start(self, log: Path) -> subprocess.Popen:
        with open(log, "ab") as handle:
            return subprocess.Popen(self.argv(), stdout=handle, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True)

    def delete(self) -> None:
        subprocess.run(["runc", "--root", str(self.state), "delete", "--force", self.name],
                       capture_output=True, timeout=60)
