"""Builders for budget test states (imported by the budget and check tests;
holds no tests itself)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import NamedTuple

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
    if "memory" in body:  # a change that is not a GPU's, where the vm-instance schema has it
        body["resources"] = {"memory": body.pop("memory")}
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


def as_listed(state: list[dict]) -> list[dict]:
    """`state` as a Cozystack cluster lists it: the cluster always holds the
    root Tenant (`root` in tenant-root) and the Namespace of tenant-root and
    of each tenant (its parent's release makes it). What `state` lacks of
    them is added plainly: the root Tenant declaring nothing, Namespaces
    without a vGPU label (no word on the entitlement), so no answer changes.
    `cozyrender check` refuses a state with no Tenant or no Namespace; a
    test of that builds its file itself."""
    from cozyrender.namespaces import owned_namespace

    def meta(obj: object, field: str) -> object:
        metadata = obj.get("metadata") if isinstance(obj, dict) else None
        return metadata.get(field) if isinstance(metadata, dict) else None

    held = {meta(obj, "name") for obj in state if isinstance(obj, dict) and obj.get("kind") == "Namespace"}
    wanted = ["tenant-root"] + [owned_namespace(meta(obj, "name"), meta(obj, "namespace")) for obj in state
                                if isinstance(obj, dict) and obj.get("kind") == "Tenant"
                                and isinstance(meta(obj, "name"), str) and isinstance(meta(obj, "namespace"), str)]
    added = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
             for name in dict.fromkeys(wanted) if name not in held]
    if not any(isinstance(obj, dict) and obj.get("kind") == "Tenant" and meta(obj, "name") == "root"
               and meta(obj, "namespace") == "tenant-root" for obj in state):
        added.append(tenant("root"))
    return [*added, *state]


def run_check(tmp_path: Path, state: list[dict], write: dict | None = None, *extra: str):
    """Run `cozyrender check` through click on `state` (as a cluster lists
    it, `as_listed`) written to tmp_path; returns click's Result (exit_code, output)."""
    from cozyrender.commands.check import command

    state_file = write_json(tmp_path / "state.json", klist(as_listed(state)))
    args = ["--state", str(state_file)]
    if write is not None:
        args += ["--write", str(write_json(tmp_path / "write.json", write))]
    return answer_of(CliRunner().invoke(command, args + list(extra)))


class Answer(NamedTuple):
    """What `run_check` saw: the exit code, `output` (stdout, then stderr
    without the line saying what was read), the two streams as written and
    click's `exception` (a SystemExit for any exit, anything else a crash)."""

    exit_code: int
    output: str
    stdout: str
    stderr: str
    exception: BaseException | None


def answer_of(result) -> Answer:
    """click's Result as an Answer, after asserting that a state that was read
    and answered (exit 0 or 1) was said on stderr, once, first."""
    lines = result.stderr.splitlines(keepends=True)
    said = [line for line in lines if line.startswith("cozyrender check: read ")]
    crashed = not (result.exception is None or isinstance(result.exception, SystemExit))
    if result.exit_code in (0, 1) and not crashed:
        assert len(said) == 1 and lines[0] == said[0], result.stderr
    rest = "".join(line for line in lines if line not in said)
    return Answer(result.exit_code, result.stdout + rest, result.stdout, result.stderr, result.exception)


def run_check_json(tmp_path: Path, state: list[dict], write: dict | None = None, *extra: str):
    result = run_check(tmp_path, state, write, "-o", "json", *extra)
    assert result.exit_code in (0, 1), result.output
    return result.exit_code, json.loads(result.stdout)


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
