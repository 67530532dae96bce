"""Memory of the post-render process on a large stream: documents no rule
touches never become object trees, and the output is written as views of the
input, so peak RSS stays under twice the input plus 50 MiB."""

from __future__ import annotations

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


# A forked child's peak RSS starts from its parent's (the big pytest process)
# until it execs, so the command is started from a small Python instead.
_MEASURE = """
import resource, subprocess, sys
with open(sys.argv[1], "rb") as stdin:
    result = subprocess.run(sys.argv[2:], stdin=stdin, stdout=subprocess.DEVNULL)
print(result.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
"""


def peak_rss(command: list[str], stdin_path) -> int:
    """Peak resident bytes of `command` reading `stdin_path`."""
    out = subprocess.run([sys.executable, "-c", _MEASURE, str(stdin_path), *command],
                         capture_output=True, text=True, check=True).stdout.split()
    assert out[0] == "0", "the command failed"
    return int(out[1]) * 1024


def test_peak_memory_stays_under_twice_the_input(tmp_path):
    stream = tmp_path / "stream.yaml"
    with open(stream, "wb") as out:
        for n in range(3000):
            out.write(RELEASE.replace(b"tenant-N", b"tenant-%d" % n))
    size = stream.stat().st_size
    peak = peak_rss([sys.executable, "-m", "cozyrender", "post-render"], stream)
    assert size > 20 * 2**20
    assert peak < 2 * size + 50 * 2**20, f"peak {peak / 2**20:.0f} MiB for {size / 2**20:.0f} MiB in"
