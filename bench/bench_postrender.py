"""Post-render performance, measured side by side with peers in one run.

1. One tenant release as Helm runs it: a whole `cozyrender post-render`
   process (interpreter start included) against `kubectl kustomize` applying
   the equivalent patches (the ones `cozyrender flux` generates) to the same
   release. Median of repeated runs.
2. Throughput on dense tenant output: ~8 MiB of the tenant chart's real output,
   rendered at bench time (cozyrender.render, Helm SDK) for ~1,600 releases
   with varied values (quota keys, GPU budgets of one to three classes and for
   all classes, vGPU requested or not, parents entitled or not, sub-tenants),
   no padding: the post-render process against a full PyYAML (libyaml)
   load-and-dump of the same stream, and a naive ruamel.yaml round trip of a
   tenth of it (scaled up, labelled so).
3. Peak memory of post-rendering a ~100 MB stream, against the bound of
   twice the input plus 50 MiB.

The release: the tenant chart rendered by Helm (10 documents, GPU budgets,
vGPU) plus the kind of documents a Cozystack tenant release also carries
(HelmReleases of the tenant's services, network policies, a hook), which no
rule touches.
"""

from __future__ import annotations

import io
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from cozyrender import flux, render  # noqa: E402
from cozyrender.postrender import post_render  # noqa: E402

COZYRENDER = [str(Path(sys.executable).parent / "cozyrender"), "post-render"]
KUBECTL = os.environ.get("COZYRENDER_KUBECTL") or str(ROOT / ".cache" / "bin" / "kubectl")
RUNS = 25

PADDING = """\
---
# Source: tenant/templates/{kind_lower}-{index}.yaml
apiVersion: {api}
kind: {kind}
metadata:
  name: {release}-{index}
  namespace: {namespace}
  labels:
    app.kubernetes.io/managed-by: Helm
    app.kubernetes.io/instance: {release}
    cozystack.io/service: service-{index}
  annotations:
    meta.helm.sh/release-name: {release}
    meta.helm.sh/release-namespace: tenant-root
spec:
  interval: 5m
  releaseName: {release}-{index}
  chart:
    spec:
      chart: cozy-service-{index}
      sourceRef: {{kind: HelmRepository, name: cozystack-apps, namespace: cozy-public}}
  values:
    replicas: 3
    resources: {{requests: {{cpu: 100m, memory: 128Mi}}, limits: {{cpu: "1", memory: 1Gi}}}}
    storage: {{size: 10Gi, class: replicated}}
    description: |
      Padding that stands for a tenant service's HelmRelease: the post-renderer
      reads none of it and must hand it back byte for byte.
      {filler}
"""


def build_release(index: int, padding: int = 18) -> bytes:
    """One tenant release: the chart's own output plus `padding` untouched documents."""
    release, namespace = f"tenant-t{index}", f"tenant-t{index}"
    values = {
        "resourceQuotas": {"cpu": "4", "memory": "8Gi", "a100.gpuclass.cozystack.io/devices": 2},
        "gpu": {"vgpu": True},
        "_cluster": {"root-host": "example.org", "gpu-vgpu": True},
        "_namespace": {"host": "example.org", "etcd": "tenant-root", "ingress": "tenant-root",
                       "monitoring": "tenant-root", "seaweedfs": "tenant-root", "vgpu": True},
    }
    chart_output = render.template(ROOT / "charts" / "tenant", values, release, "tenant-root")
    pads = "".join(
        PADDING.format(kind="HelmRelease", kind_lower="helmrelease", api="helm.toolkit.fluxcd.io/v2",
                       release=release, namespace=namespace, index=i, filler="x" * 400)
        for i in range(padding)
    )
    return chart_output + pads.encode()


def median_seconds(command: list[str], data: bytes | None = None, runs: int = RUNS) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(command, input=data, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def peak_rss_mib(command: list[str], data_path: Path) -> float:
    """Peak resident memory of `command` reading `data_path`, started from a
    small Python (a forked child's peak counts its parent's pages until exec)."""
    measure = (
        "import resource, subprocess, sys\n"
        "with open(sys.argv[1], 'rb') as stdin:\n"
        "    subprocess.run(sys.argv[2:], stdin=stdin, stdout=subprocess.DEVNULL, check=True)\n"
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
    )
    out = subprocess.run([sys.executable, "-c", measure, str(data_path), *command],
                         capture_output=True, text=True, check=True).stdout
    return int(out) / 1024  # KiB on Linux


def objects(text: bytes) -> list:
    """Objects for comparison; a Secret's values.yaml compared as parsed values."""
    found = []
    for obj in yaml.safe_load_all(text):
        if obj and obj.get("kind") == "Secret" and "values.yaml" in obj.get("stringData", {}):
            obj["stringData"]["values.yaml"] = yaml.safe_load(obj["stringData"]["values.yaml"])
        if obj:
            found.append(yaml.safe_dump(obj, sort_keys=True))
    return sorted(found)


def bench_one_release() -> None:
    release = build_release(0)
    documents = release.count(b"\n---\n") + 1
    expected = post_render(release).output
    with tempfile.TemporaryDirectory() as folder:
        base = Path(folder)
        (base / "release.yaml").write_bytes(release)
        (base / "kustomization.yaml").write_text(yaml.safe_dump(
            {"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
             "resources": ["release.yaml"], "patches": flux.derive(release).patches}))
        kustomized = subprocess.run([KUBECTL, "kustomize", folder], capture_output=True, check=True).stdout
        assert objects(kustomized) == objects(expected), "the peer must produce the same objects"
        ours = median_seconds(COZYRENDER, release)
        peer = median_seconds([KUBECTL, "kustomize", folder])
    # Where the time goes: the interpreter alone, and with PyYAML imported.
    interpreter = median_seconds([sys.executable, "-c", "pass"], release)
    with_yaml = median_seconds([sys.executable, "-c", "import yaml"], release)
    print(f"one release ({documents} documents, {len(release) / 1024:.1f} KiB), whole process, median of {RUNS}:")
    print(f"  cozyrender post-render   {ours * 1000:7.1f} ms")
    print(f"  kubectl kustomize        {peer * 1000:7.1f} ms   (same patches as `cozyrender flux`, same objects out)")
    print(f"  ratio kustomize/cozyrender: {peer / ours:.1f}x   (target: >= 3x, cozyrender <= 40 ms)")
    print(f"  floor: python -c pass {interpreter * 1000:.1f} ms, python -c 'import yaml' {with_yaml * 1000:.1f} ms;"
          f" cozyrender's own imports and work {(ours - with_yaml) * 1000:.1f} ms")


DENSE_TARGET = 8 * 2**20
CLASSES = ("a100", "h100", "l40s", "a10")


def dense_release(index: int, rng) -> bytes:
    """The tenant chart's own output for one release with varied values (no padding)."""
    parent = "tenant-root" if index % 4 == 0 else f"tenant-p{index % 97}"
    release = f"tenant-t{index}"
    quotas: dict[str, object] = {}
    for key in rng.sample(["cpu", "memory", "storage", "pods", "services", "ephemeral-storage"], rng.randint(0, 4)):
        quotas[key] = {"memory": f"{rng.randint(1, 64)}Gi", "storage": f"{rng.randint(1, 500)}Gi",
                       "ephemeral-storage": f"{rng.randint(1, 50)}Gi"}.get(key, str(rng.randint(1, 40)))
    for gpu_class in rng.sample(CLASSES, rng.randint(0, 3)):
        quotas[f"{gpu_class}.gpuclass.cozystack.io/devices"] = rng.randint(0, 8)
    if rng.random() < 0.3:
        quotas["gpuclass.cozystack.io/devices"] = rng.randint(1, 16)
    entitled = rng.random() < 0.5
    values = {
        "resourceQuotas": quotas,
        "gpu": {"vgpu": rng.random() < 0.5},
        "_cluster": {"root-host": "example.org", "gpu-vgpu": entitled},
        "_namespace": {"host": f"t{index}.example.org", "etcd": parent, "ingress": parent,
                       "monitoring": parent, "seaweedfs": parent, "vgpu": entitled and rng.random() < 0.7},
    }
    return render.template(ROOT / "charts" / "tenant", values, release, parent)


def dense_stream(target: int = DENSE_TARGET) -> tuple[bytes, int]:
    """(stream, releases): tenant releases rendered until the stream holds `target` bytes."""
    import random

    rng = random.Random(12)
    parts, size, index = [], 0, 0
    while size < target:
        part = dense_release(index, rng)
        parts.append(part)
        size += len(part)
        index += 1
    return b"".join(parts), index


def bench_stream() -> None:
    started = time.perf_counter()
    stream, releases = dense_stream()
    rendering = time.perf_counter() - started
    documents = stream.count(b"\n---\n") + 1
    post_render(stream)  # the stream is one the post-renderer accepts (raises otherwise)
    ours = median_seconds(COZYRENDER, stream, runs=3)
    started = time.perf_counter()
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    yaml.dump_all(list(yaml.load_all(stream, Loader=loader)), Dumper=dumper)
    pyyaml = time.perf_counter() - started

    from ruamel.yaml import YAML

    tenth = stream[:len(stream) // 10]
    tenth = tenth[:tenth.rindex(b"\n---\n") + 1]
    round_trip = YAML()
    started = time.perf_counter()
    out = io.StringIO()
    round_trip.dump_all(list(round_trip.load_all(tenth.decode())), out)
    ruamel = (time.perf_counter() - started) * 10

    print(f"\ndense tenant output: {releases} releases of the tenant chart rendered with varied values "
          f"({documents} documents, {len(stream) / 2**20:.1f} MiB, no padding; rendering took {rendering:.0f} s):")
    print(f"  cozyrender post-render (process, median of 3)   {ours:6.2f} s   "
          f"({len(stream) / 2**20 / ours:.1f} MiB/s)")
    print(f"  PyYAML libyaml load + dump (in process)         {pyyaml:6.2f} s")
    print(f"  ruamel.yaml round trip (a tenth x 10)           {ruamel:6.2f} s")
    print(f"  ratios: PyYAML/cozyrender {pyyaml / ours:.1f}x, ruamel/cozyrender {ruamel / ours:.1f}x")


def bench_memory() -> None:
    release_block = b"".join(build_release(i) for i in range(20))
    repeats = (100 * 2**20) // len(release_block) + 1
    with tempfile.NamedTemporaryFile(suffix=".yaml") as file:
        for repeat in range(repeats):  # a tenant appears once: rename per repeat
            file.write(release_block.replace(b"tenant-t", b"tenant-r%d-t" % repeat))
        file.flush()
        size_mib = os.path.getsize(file.name) / 2**20
        ours = peak_rss_mib(COZYRENDER, Path(file.name))
        baseline = peak_rss_mib([sys.executable, "-c", "import sys; sys.stdin.buffer.read()"], Path(file.name))
    bound = 2 * size_mib + 50
    print(f"\nmemory, a {size_mib:.0f} MiB stream:")
    print(f"  cozyrender post-render peak RSS   {ours:6.0f} MiB   (bound: 2 x input + 50 = {bound:.0f} MiB; "
          f"{ours / bound:.2f} of it)")
    print(f"  python reading stdin, for scale   {baseline:6.0f} MiB   (ratio {ours / baseline:.2f}x)")


def run() -> None:
    bench_one_release()
    bench_stream()
    bench_memory()


if __name__ == "__main__":
    run()
