"""The webhook's cost of injecting postRenderers into a tenant HelmRelease
(issue 17), side by side with its peer in the same run. Not a test: nothing
here asserts a time.

The peer is the chart render alone, in process: the part of the work Helm
would do anyway. The total also covers the in-process post-render, the
object diff and the guards (`flux.inject.postrenderers_for`), and the whole
AdmissionReview answer (`webhook.mutate.mutate`: the JSON Patch, base64).
The measured figures are the CPU time (least of the runs) and the median wall
time per release, for a GPU-only tenant (deletes and their guards) and a
mixed one (key removals).

The time for a flip at the root to reach a depth-3 tenant's label, through
real helm-controller, is measured by tests/test_flux_cluster.py
(`test_flip_at_the_root_reaches_depth3` prints it and records it as the
property `flip_to_depth3_seconds`), since it needs the control plane.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from cozyrender.flux import inject, render_values  # noqa: E402
from cozyrender.render.values import merge_values  # noqa: E402
from cozyrender.webhook.mutate import mutate  # noqa: E402

TENANT = ROOT / "charts" / "tenant"
PARENT = yaml.safe_load((ROOT / "examples" / "flux" / "parent-values.yaml").read_text())
CASES = {
    "gpu-only": {"gpu": {"vgpu": True}, "resourceQuotas": {"gpuclass.cozystack.io/devices": 4,
                                                           "a100.gpuclass.cozystack.io/devices": 2}},
    "mixed": {"gpu": {"vgpu": True}, "resourceQuotas": {"cpu": "8", "memory": "32Gi",
                                                        "a100.gpuclass.cozystack.io/devices": 2}},
}
RUNS = 20


def release(spec: dict) -> dict:
    return {"apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
            "metadata": {"name": "tenant-a", "namespace": "tenant-root",
                         "labels": {"apps.cozystack.io/application.kind": "Tenant"}},
            "spec": {"chartRef": {"kind": "ExternalArtifact",
                                  "name": "cozystack-tenant-application-default-tenant",
                                  "namespace": "cozy-system"},
                     "valuesFrom": [{"kind": "Secret", "name": "cozystack-values"}], "values": spec}}


def measure(action) -> tuple[float, float]:
    """(median wall seconds, least CPU seconds) over RUNS calls."""
    action()  # warm: chart loaded, modules imported
    walls, cpus = [], []
    for _ in range(RUNS):
        wall, cpu = time.perf_counter(), time.process_time()
        action()
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return statistics.median(walls), min(cpus)


def run() -> None:
    parent = inject.ParentState(PARENT, vgpu_label="true")
    print(f"{'case':<10} {'step':<34} {'wall ms':>9} {'cpu ms':>8} {'x render':>9}")
    for name, spec in CASES.items():
        hr = release(spec)
        review = {"request": {"uid": "u", "operation": "CREATE", "namespace": "tenant-root", "object": hr}}
        values = merge_values(PARENT, spec)
        steps = {
            "render alone (peer)": lambda: render_values(TENANT, values, "tenant-a", "tenant-root"),
            "inject.postrenderers_for": lambda: inject.postrenderers_for(hr, parent, TENANT),
            "webhook.mutate (AdmissionReview)": lambda: mutate(review, lambda ns: parent, TENANT),
        }
        base = None
        cpus = {}
        for step, action in steps.items():
            wall, cpu = measure(action)
            base = base or cpu
            cpus[step] = cpu
            print(f"{name:<10} {step:<34} {wall * 1000:9.1f} {cpu * 1000:8.1f} {cpu / base:9.2f}")
        # The injection includes the render: the target (issue 26 item 4) is what it adds.
        added = cpus["webhook.mutate (AdmissionReview)"] - base
        verdict = "met" if added <= base else "NOT met"
        print(f"{name:<10} {'added to the render by injection':<34} {'':>9} {added * 1000:8.1f} {added / base:9.2f}"
              f"   target <= 1.00x the render: {verdict}")


if __name__ == "__main__":
    run()
