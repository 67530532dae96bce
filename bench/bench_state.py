"""Loading a large state (issue 12 item 6): the same `kubectl get -o yaml`
shaped state (a `kind: List` of Pods, Nodes, Tenants, VMInstances,
ResourceQuotas and GPUClasses as kubectl writes them, no padding) loaded as
YAML and as JSON through `cozyrender.state.load_objects`, side by side, each
in its own process so peak memory is its own. Beside them, the way it was
loaded before: PyYAML's `load_all` with libyaml's CSafeLoader, which composes
the whole List into a node tree first (with the collector running, as a
plain script would). Prints times, peak RSS and ratios; asserts nothing."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

TARGET_MIB = 25


def _pod(rng: random.Random, index: int) -> dict:
    namespace = f"tenant-t{index % 40}"
    app = f"app{index % 300}"
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "creationTimestamp": "2026-11-02T09:14:27Z", "generateName": f"{app}-7d9f8c6b5-",
            "labels": {"app.kubernetes.io/name": app, "pod-template-hash": "7d9f8c6b5"},
            "name": f"{app}-7d9f8c6b5-{index:05x}", "namespace": namespace,
            "ownerReferences": [{"apiVersion": "apps/v1", "blockOwnerDeletion": True, "controller": True,
                                 "kind": "ReplicaSet", "name": f"{app}-7d9f8c6b5",
                                 "uid": f"5c1e2f0a-33b1-4d7e-9a51-{index:012x}"}],
            "resourceVersion": str(4_000_000 + index), "uid": f"9b0d6a51-8f7e-4c02-b1d3-{index:012x}",
        },
        "spec": {
            "containers": [{
                "image": f"registry.example.com/{app}:1.{index % 9}.0", "imagePullPolicy": "IfNotPresent",
                "name": "main", "ports": [{"containerPort": 8080, "name": "http", "protocol": "TCP"}],
                "resources": {"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "250m", "memory": "512Mi"}},
                "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
                "volumeMounts": [{"mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                                  "name": "kube-api-access-x7k2p", "readOnly": True}],
            }],
            "dnsPolicy": "ClusterFirst", "enableServiceLinks": True, "nodeName": f"node-{rng.randint(0, 199)}",
            "preemptionPolicy": "PreemptLowerPriority", "priority": 0, "restartPolicy": "Always",
            "schedulerName": "default-scheduler", "securityContext": {}, "serviceAccount": "default",
            "serviceAccountName": "default", "terminationGracePeriodSeconds": 30,
            "tolerations": [{"effect": "NoExecute", "key": "node.kubernetes.io/not-ready", "operator": "Exists",
                             "tolerationSeconds": 300},
                            {"effect": "NoExecute", "key": "node.kubernetes.io/unreachable", "operator": "Exists",
                             "tolerationSeconds": 300}],
            "volumes": [{"name": "kube-api-access-x7k2p", "projected": {"defaultMode": 420, "sources": [
                {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                {"configMap": {"items": [{"key": "ca.crt", "path": "ca.crt"}], "name": "kube-root-ca.crt"}}]}}],
        },
        "status": {
            "conditions": [{"lastProbeTime": None, "lastTransitionTime": "2026-11-02T09:14:31Z", "status": "True",
                            "type": kind} for kind in ("Initialized", "Ready", "ContainersReady", "PodScheduled")],
            "containerStatuses": [{"containerID": f"containerd://{index:064x}", "image": f"registry.example.com/{app}:1.0",
                                   "imageID": f"registry.example.com/{app}@sha256:{index:064x}", "name": "main",
                                   "ready": True, "restartCount": 0, "started": True,
                                   "state": {"running": {"startedAt": "2026-11-02T09:14:30Z"}}}],
            "hostIP": "10.0.3.17", "phase": "Running", "podIP": f"10.244.{index % 250}.{index % 200 + 2}",
            "qosClass": "Burstable", "startTime": "2026-11-02T09:14:27Z",
        },
    }


def _others(rng: random.Random) -> list[dict]:
    apps = "apps.cozystack.io/v1alpha1"
    objects: list[dict] = []
    for index in range(200):
        objects.append({"apiVersion": "v1", "kind": "Node", "metadata": {
            "labels": {"kubernetes.io/hostname": f"node-{index}", "kubernetes.io/os": "linux"}, "name": f"node-{index}"},
            "spec": {"podCIDR": f"10.244.{index}.0/24"},
            "status": {"allocatable": {"cpu": "63500m", "memory": "257000Mi", "pods": "110",
                                       "nvidia.com/a100": str(index % 5)},
                       "capacity": {"cpu": "64", "memory": "263000Mi", "pods": "110", "nvidia.com/a100": str(index % 5)},
                       "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]}})
    for index in range(40):
        objects.append({"apiVersion": apps, "kind": "Tenant", "metadata": {"name": f"t{index}", "namespace": "tenant-root"},
                        "spec": {"resourceQuotas": {"cpu": str(rng.randint(50, 400)), "a100.gpuclass.cozystack.io/devices": 4}}})
        objects.append({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "tenant-quota",
                        "namespace": f"tenant-t{index}"}, "spec": {"hard": {"limits.cpu": "400"}},
                        "status": {"hard": {"limits.cpu": "400"}, "used": {"limits.cpu": f"{rng.randint(1, 300)}"}}})
    for index in range(2000):
        objects.append({"apiVersion": apps, "kind": "VMInstance", "metadata": {"name": f"vm{index}",
                        "namespace": f"tenant-t{index % 40}"},
                        "spec": {"instanceType": "u1.large", "gpus": [{"class": "a100", "count": 1}] if index % 50 == 0 else []}})
    objects.append({"apiVersion": "cozystack.io/v1alpha1", "kind": "GPUClass", "metadata": {"name": "a100"},
                    "spec": {"vendor": "nvidia", "model": "A100", "mode": "passthrough", "memory": "40Gi",
                             "sourceKind": "PCIHostDevice", "resourceName": "nvidia.com/a100"}})
    return objects


def generate(target_bytes: int) -> list[dict]:
    rng = random.Random(12)
    objects = _others(rng)
    per_pod = len(yaml.dump(_pod(rng, 0), Dumper=yaml.CSafeDumper, default_flow_style=False))
    objects += [_pod(rng, index) for index in range(target_bytes // per_pod)]
    return objects


_MEASURE = r"""
import gc, json, sys, time
how, path = sys.argv[1], sys.argv[2]
start = time.perf_counter()
if how == "cozyrender":
    from cozyrender.state import load_objects
    count = len(load_objects([path]))
else:
    import yaml
    count = sum(len(doc.get("items") or [doc]) for doc in yaml.load_all(open(path).read(), Loader=yaml.CSafeLoader) if doc)
took = time.perf_counter() - start
# VmHWM, not ru_maxrss: the latter keeps the parent's high-water mark across exec.
hwm = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:"))
print(json.dumps({"objects": count, "seconds": took, "rss": hwm * 1024}))
"""


def _measure(how: str, path: Path) -> dict:
    out = subprocess.run([sys.executable, "-c", _MEASURE, how, str(path)], check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def run() -> None:
    objects = generate(TARGET_MIB * 2**20)
    document = {"apiVersion": "v1", "items": objects, "kind": "List", "metadata": {"resourceVersion": ""}}
    with tempfile.TemporaryDirectory() as tmp:
        yaml_path, json_path = Path(tmp) / "state.yaml", Path(tmp) / "state.json"
        yaml_path.write_text(yaml.dump(document, Dumper=yaml.CSafeDumper, default_flow_style=False, sort_keys=False))
        json_path.write_text(json.dumps(document, indent=4))
        del objects, document
        results = {}
        for name, how, path in (("YAML", "cozyrender", yaml_path), ("JSON", "cozyrender", json_path),
                                ("YAML, PyYAML load_all + CSafeLoader", "pyyaml", yaml_path)):
            runs = 2 if how == "cozyrender" else 1  # the peer takes half a minute
            best = min((_measure(how, path) for _ in range(runs)), key=lambda r: r["seconds"])
            results[name] = best
            print(f"{name:38} {path.stat().st_size / 2**20:6.1f} MiB  {best['objects']:,} objects  "
                  f"{best['seconds']:6.2f} s  peak RSS {best['rss'] / 2**20:5.0f} MiB", flush=True)
    yaml_r, json_r, before = results["YAML"], results["JSON"], results["YAML, PyYAML load_all + CSafeLoader"]
    print(f"YAML / JSON through cozyrender: {yaml_r['seconds'] / json_r['seconds']:.1f}x the time, "
          f"{yaml_r['rss'] / json_r['rss']:.1f}x the memory")
    print(f"cozyrender's YAML load vs PyYAML's load_all: {before['seconds'] / yaml_r['seconds']:.1f}x faster, "
          f"{before['rss'] / yaml_r['rss']:.1f}x less memory")


if __name__ == "__main__":
    run()
