"""Builders for budget test states (imported by the budget and check tests;
holds no tests itself)."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

APPS = "apps.cozystack.io/v1alpha1"


def tenant(name: str, namespace: str = "tenant-root", quotas: dict | None = None, vgpu: bool | None = None) -> dict:
    spec: dict = {}
    if quotas is not None:
        spec["resourceQuotas"] = quotas
    if vgpu is not None:
        spec["gpu"] = {"vgpu": vgpu}
    return {"apiVersion": APPS, "kind": "Tenant", "metadata": {"name": name, "namespace": namespace}, "spec": spec}


def vm(namespace: str, name: str, gpus: list | None = None, **spec) -> dict:
    body = dict(spec)
    if gpus is not None:
        body["gpus"] = gpus
    return {"apiVersion": APPS, "kind": "VMInstance", "metadata": {"name": name, "namespace": namespace}, "spec": body}


def nodes(namespace: str, name: str, gpus: list, max_replicas: int | None = 1, **spec) -> dict:
    body = dict(spec, gpus=gpus)
    if max_replicas is not None:
        body["maxReplicas"] = max_replicas
    return {"apiVersion": APPS, "kind": "KubernetesNodes", "metadata": {"name": name, "namespace": namespace}, "spec": body}


def pod(namespace: str, name: str, limits: dict, phase: str = "Running", requests: dict | None = None) -> dict:
    resources = {"limits": limits}
    if requests is not None:
        resources["requests"] = requests
    return {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace},
        "spec": {"containers": [{"name": "main", "resources": resources}]},
        "status": {"phase": phase},
    }


def quota(namespace: str, name: str, used: dict, hard: dict | None = None) -> dict:
    return {
        "apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": name, "namespace": namespace},
        "spec": {"hard": hard or dict(used)}, "status": {"hard": hard or dict(used), "used": used},
    }


def gpuclass(name: str, resource: str, mode: str = "passthrough", created: str | None = "2026-01-01T00:00:00Z") -> dict:
    spec: dict = {"vendor": "nvidia", "model": name.upper(), "mode": mode, "memory": "40Gi",
                  "sourceKind": "PCIHostDevice", "resourceName": resource}
    if mode != "passthrough":
        spec["profile"] = "A100-4C"
    if mode == "vgpu":
        spec["sourceKind"] = "MediatedDevice"
        spec["license"] = {"secretRef": {"namespace": "cozy-gpu", "name": "nvidia-license"}, "featureType": 4}
    meta: dict = {"name": name}
    if created is not None:
        meta["creationTimestamp"] = created
    return {"apiVersion": "cozystack.io/v1alpha1", "kind": "GPUClass", "metadata": meta, "spec": spec}


def classes(*names: str) -> list[dict]:
    """Passthrough GPUClasses for `names` (a state without any GPUClass
    refuses every class a workload names)."""
    return [gpuclass(name, f"nvidia.com/{name}") for name in names or ("a100", "h100")]


def root_namespace(vgpu: str | None) -> dict:
    labels = {} if vgpu is None else {"namespace.cozystack.io/vgpu": vgpu}
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "tenant-root", "labels": labels}}


def klist(objects: list[dict]) -> dict:
    return {"apiVersion": "v1", "kind": "List", "items": objects}


def write_json(path: Path, obj) -> Path:
    path.write_text(json.dumps(obj, indent=1))
    return path


def run_check(tmp_path: Path, state: list[dict], write: dict | None = None, *extra: str):
    """Run `cozyrender check` through click on a state written to tmp_path;
    returns click's Result (exit_code, output)."""
    from cozyrender.commands.check import command

    state_file = write_json(tmp_path / "state.json", klist(state))
    args = ["--state", str(state_file)]
    if write is not None:
        args += ["--write", str(write_json(tmp_path / "write.json", write))]
    return CliRunner().invoke(command, args + list(extra))


def run_check_json(tmp_path: Path, state: list[dict], write: dict | None = None, *extra: str):
    result = run_check(tmp_path, state, write, "-o", "json", *extra)
    assert result.exit_code in (0, 1), result.output
    return result.exit_code, json.loads(result.output)


def kubernetes(namespace: str, name: str, groups: dict, **spec) -> dict:
    """A Kubernetes cluster (apps.cozystack.io) with `groups`: node group name
    -> its fields (`gpus`, `minReplicas`, `maxReplicas`...)."""
    body = dict(spec, nodeGroups=groups)
    return {"apiVersion": APPS, "kind": "Kubernetes", "metadata": {"name": name, "namespace": namespace}, "spec": body}


def node_group(gpus: list | None = None, max_replicas: int | None = 1, **fields) -> dict:
    group = dict(fields)
    if gpus is not None:
        group["gpus"] = gpus
    if max_replicas is not None:
        group["maxReplicas"] = max_replicas
    return group
