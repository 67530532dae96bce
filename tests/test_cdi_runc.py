"""tools/node/cdi_runc.py, the stand-in for containerd 1.7's CDI step on the test node, on bundles
and kubelet state laid out as the node lays them (the live path: tests/test_node_dra.py):
a pod container's `create` gets the `env` edits of the CDI devices prepared for its pod, and
nothing of another pod's; a sandbox, another runc call, or state it cannot read leave the bundle
as it was, and runc always runs with the same arguments."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "tools" / "node" / "cdi_runc.py"
POD_A = "11111111-2222-3333-4444-555555555555"
POD_B = "66666666-7777-8888-9999-000000000000"


def node(tmp_path: Path, checkpoint: str | None = None) -> tuple[Path, Path]:
    kubelet, cdi = tmp_path / "kubelet", tmp_path / "cdi"
    kubelet.mkdir()
    cdi.mkdir()
    claims = [{"ClaimUID": f"claim-{pod[:1]}", "PodUIDs": {pod: {}}, "DriverState": {"gpu.cozyrender.io": {
        "Devices": [{"PoolName": "n", "DeviceName": f"gpu-{i}", "CDIDeviceIDs": [f"gpu.cozyrender.io/gpu=c{pod[:1]}-gpu-{i}"]}]}}}
              for i, pod in enumerate((POD_A, POD_B))]
    data = json.dumps({"kind": "DRACheckpoint", "ClaimInfoStateList": claims})
    (kubelet / "dra_manager_state").write_text(checkpoint if checkpoint is not None
                                                else json.dumps({"Data": data, "Checksum": 0}))
    for i, pod in enumerate((POD_A, POD_B)):
        (cdi / f"gpu.cozyrender.io-c{pod[:1]}.json").write_text(json.dumps({
            "cdiVersion": "0.6.0", "kind": "gpu.cozyrender.io/gpu",
            "devices": [{"name": f"c{pod[:1]}-gpu-{i}", "containerEdits": {"env": [f"COZYRENDER_DRA_GPU_{i}=ns/c"]}}]}))
    return kubelet, cdi


def bundle(tmp_path: Path, kubelet: Path, kind: str = "container") -> Path:
    folder = tmp_path / f"bundle-{kind}"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({
        "process": {"env": ["PATH=/bin"]}, "annotations": {"io.kubernetes.cri.container-type": kind},
        "mounts": [{"destination": "/etc/hosts", "source": f"{kubelet}/pods/{POD_A}/etc-hosts"}]}))
    return folder


def run(kubelet: Path, cdi: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-I", "-S", str(SCRIPT), "--runc", "/bin/echo", "--cdi-dir", str(cdi),
                           "--kubelet-dir", str(kubelet), "--", *args], capture_output=True, text=True)


def env(folder: Path) -> list[str]:
    return json.loads((folder / "config.json").read_text())["process"]["env"]


def test_a_pod_container_gets_its_pods_cdi_env_and_no_other_pods(tmp_path):
    kubelet, cdi = node(tmp_path)
    folder = bundle(tmp_path, kubelet)
    result = run(kubelet, cdi, "--root", "/r", "create", "--bundle", str(folder), "--pid-file", "p", "id1")
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["--root", "/r", "create", "--bundle", str(folder), "--pid-file", "p", "id1"]
    assert env(folder) == ["PATH=/bin", "COZYRENDER_DRA_GPU_0=ns/c"]


def test_a_sandbox_or_another_call_is_left_as_it_was(tmp_path):
    kubelet, cdi = node(tmp_path)
    sandbox, container = bundle(tmp_path, kubelet, "sandbox"), bundle(tmp_path, kubelet)
    assert run(kubelet, cdi, "create", "--bundle", str(sandbox), "id2").returncode == 0
    assert run(kubelet, cdi, "state", str(container)).returncode == 0
    assert env(sandbox) == env(container) == ["PATH=/bin"]


def test_state_it_cannot_read_leaves_the_bundle_and_runc_still_runs(tmp_path):
    kubelet, cdi = node(tmp_path, checkpoint="not json")
    folder = bundle(tmp_path, kubelet)
    result = run(kubelet, cdi, "create", "--bundle", str(folder), "id3")
    assert result.returncode == 0 and result.stdout.split()[-1] == "id3"
    assert "left" in result.stderr and env(folder) == ["PATH=/bin"]
