"""Memory of the post-render process on a large stream: documents no rule
touches never become object trees, and the output is written as views of the
input, so peak RSS stays under twice the input plus 50 MiB."""

from __future__ import annotations

import os
import subprocess
import sys

RELEASE = b"""\
---
# Source: tenant/templates/namespace.yaml
apiVersion: v1
kind: Namespace
metadata:
  name: tenant-N
  annotations:
    render.cozystack.io/vgpu-requested: "true"
    render.cozystack.io/vgpu-parent: "true"
---
# Source: tenant/templates/quota.yaml
apiVersion: v1
kind: ResourceQuota
metadata: {name: tenant-quota, namespace: tenant-N}
spec:
  hard: {requests.cpu: "1", a100.gpuclass.cozystack.io/devices: "1"}
""" + b"".join(
    b"---\n# Source: tenant/templates/rbac.yaml\nkind: RoleBinding\nmetadata: {name: rb-%d, namespace: tenant-N}\n"
    b"subjects: [{kind: Group, name: %s}]\n" % (i, b"x" * 300) for i in range(20)
)


def test_peak_memory_stays_under_twice_the_input(tmp_path):
    stream = tmp_path / "stream.yaml"
    with open(stream, "wb") as out:
        for n in range(3000):
            out.write(RELEASE.replace(b"tenant-N", b"tenant-%d" % n))
    size = stream.stat().st_size
    with open(stream, "rb") as stdin:
        process = subprocess.Popen([sys.executable, "-m", "cozyrender", "post-render"], stdin=stdin,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        _, status, usage = os.wait4(process.pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, process.stderr.read()
    peak = usage.ru_maxrss * 1024
    assert size > 20 * 2**20
    assert peak < 2 * size + 50 * 2**20, f"peak {peak / 2**20:.0f} MiB for {size / 2**20:.0f} MiB in"
