"""What the budget rules read from objects: a Tenant's declaration and a
workload's GPU reservation.

Declarations are split the way the rules need them: valid budget keys with
whole device counts, ordinary keys with exact quantities, and whatever is
malformed with the reason (the declaration gate refuses those, the audit
reports them). Reservations follow `spec.gpus`: class entries
`{class, count}` (count defaults to 1), times `spec.maxReplicas` for a
KubernetesNodes worker pool; an entry naming only a device-plugin `name`
reserves nothing.

Pure functions, no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from functools import lru_cache
from typing import NamedTuple

from cozyrender.keys import (
    BudgetKey,
    InvalidBudgetKey,
    InvalidBudgetValue,
    in_budget_domain,
    is_class_name,
    parse_budget_key,
    parse_budget_value,
)
from cozyrender.kube.quantity import InvalidQuantity, parse_quantity
from cozyrender.kube.shape import ShapeError, as_mapping, mapping, string

from .tree import owned_namespace
from .usage import usage_key

APPS_GROUP = "apps.cozystack.io"
TENANT = "Tenant"
VM_INSTANCE = "VMInstance"
KUBERNETES_NODES = "KubernetesNodes"
WORKLOAD_KINDS = (VM_INSTANCE, KUBERNETES_NODES)


def api_group(obj: Mapping) -> str:
    api_version = obj.get("apiVersion")
    return _group_of(api_version) if isinstance(api_version, str) else ""


@lru_cache(maxsize=256)
def _group_of(api_version: str) -> str:
    return api_version.rpartition("/")[0]


def is_apps_object(obj: Mapping, kind: str) -> bool:
    return obj.get("kind") == kind and api_group(obj) == APPS_GROUP


def metadata_name_namespace(obj: Mapping) -> tuple[str, str]:
    """(namespace, name) of a namespaced object; ShapeError when missing."""
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        raise ShapeError.at(obj, "metadata", "is missing" if meta is None else "is not an object")
    name = string(meta, "name", obj, "metadata")
    namespace = string(meta, "namespace", obj, "metadata")
    if not name:
        raise ShapeError.at(obj, "metadata.name", "is missing")
    if not namespace:
        raise ShapeError.at(obj, "metadata.namespace", "is missing")
    return namespace, name


def quota_field(key: str) -> str:
    """The field path of one declared key, as admission messages name it."""
    return f'spec.resourceQuotas["{key}"]'


@dataclass(frozen=True)
class Declaration:
    """A Tenant's `spec.resourceQuotas`, split for the budget rules.

    `budgets` maps each valid budget key to its whole device count;
    `ordinary` maps every key outside the budget domain to its quantity,
    keyed by the quota key it renders to (`usage_key`: `cpu` and
    `limits.cpu` are one key), and `declared_as` maps that quota key back
    to the key as written (for field names); `problems` lists (key, reason)
    for malformed budget keys, invalid budget values, ordinary values that
    are not non-negative quantities and two keys rendering to one quota key
    (the smaller value is kept: never more than either promises). A
    tenant that declares any key at all (`declared_keys`) is a pool root for
    budget keys; one that declares a key outside the domain is a pool root
    for ordinary keys.
    """

    tenant: str
    created_in: str
    namespace: str
    budgets: dict[BudgetKey, int] = field(default_factory=dict)
    ordinary: dict[str, Fraction] = field(default_factory=dict)
    declared_as: dict[str, str] = field(default_factory=dict)
    problems: tuple[tuple[str, str], ...] = ()
    declared_keys: tuple[str, ...] = ()
    requests_vgpu: bool = False

    @property
    def is_budget_root(self) -> bool:
        return bool(self.declared_keys)

    @property
    def is_ordinary_root(self) -> bool:
        return any(not in_budget_domain(key) for key in self.declared_keys)


def parse_declaration(tenant: Mapping) -> Declaration:
    """Read a Tenant object. Malformed keys and values are collected in
    `problems`, never raised: refusing them is the declaration gate's job."""
    from cozyrender.entitlement import flag_value

    created_in, name = metadata_name_namespace(tenant)
    spec = mapping(tenant, "spec", tenant)
    quotas = mapping(spec, "resourceQuotas", tenant, "spec")
    budgets: dict[BudgetKey, int] = {}
    ordinary: dict[str, Fraction] = {}
    declared_as: dict[str, str] = {}
    problems: list[tuple[str, str]] = []
    for key, value in quotas.items():
        key = str(key)
        if in_budget_domain(key):
            try:
                parsed = parse_budget_key(key)
            except InvalidBudgetKey as err:
                problems.append((key, f"unsupported GPU budget key {err}"))
                continue
            try:
                budgets[parsed] = parse_budget_value(value)
            except InvalidBudgetValue as err:
                problems.append((key, f"invalid GPU budget for {key!r}: {err}"))
        else:
            try:
                quantity = parse_quantity(value)
            except InvalidQuantity as err:
                problems.append((key, f"{key!r}: {err}"))
                continue
            if quantity < 0:
                problems.append((key, f"{key!r}: {value!r} is negative"))
                continue
            rendered = usage_key(key)
            other = declared_as.get(rendered)
            if other is not None:
                problems.append((key, f"{key!r} renders to the same quota key as {other!r} ({rendered})"))
                if quantity >= ordinary[rendered]:
                    continue
            ordinary[rendered] = quantity
            declared_as[rendered] = key
    gpu = mapping(spec, "gpu", tenant, "spec")
    requests_vgpu = bool(flag_value(gpu.get("vgpu")))
    namespace = owned_namespace(name, created_in)  # `root` in tenant-root owns tenant-root
    return Declaration(
        tenant=name,
        created_in=created_in,
        namespace=namespace,
        budgets=budgets,
        ordinary=ordinary,
        declared_as=declared_as,
        problems=tuple(problems),
        declared_keys=tuple(str(key) for key in quotas),
        requests_vgpu=requests_vgpu,
    )


# Workloads name a handful of classes: test each name once.
_is_class_name = lru_cache(maxsize=4096)(is_class_name)


class ClassEntry(NamedTuple):
    """One class entry of `spec.gpus`: its index, class and per-replica count."""

    index: int
    gpu_class: str
    count: int
    count_given: bool


class Workload(NamedTuple):
    """A VMInstance or KubernetesNodes object as the budget check sees it.

    `reservations` maps each class to the devices it reserves: the summed
    counts of its entries, times `max_replicas` for a worker pool. (A
    NamedTuple: a state holds a hundred thousand of them.)
    """

    kind: str
    namespace: str
    name: str
    entries: tuple[ClassEntry, ...]
    max_replicas: int
    reservations: dict[str, int]

    @property
    def identity(self) -> tuple[str, str, str]:
        return (self.kind, self.namespace, self.name)


def parse_workload(obj: Mapping) -> Workload:
    """Read a VMInstance or KubernetesNodes object; ShapeError for a
    negative or fractional count, an entry with neither `class` nor `name`,
    a class that is not a DNS-1123 label, or a worker pool naming classes
    without a whole `spec.maxReplicas`."""
    kind = obj.get("kind")
    if kind not in WORKLOAD_KINDS:
        raise ShapeError.at(obj, "", "not a VMInstance or KubernetesNodes")
    namespace, name = metadata_name_namespace(obj)
    spec = mapping(obj, "spec", obj)
    gpus = spec.get("gpus")
    if not isinstance(gpus, list):
        if gpus is not None:
            raise ShapeError.at(obj, "spec.gpus", "is not a list")
        gpus = ()
    if not gpus:  # most workloads: nothing to reserve
        return Workload(kind, namespace, name, (), 1, {})
    entries: list[ClassEntry] = []
    for index, entry in enumerate(gpus):
        entry = as_mapping(entry, obj, f"spec.gpus[{index}]") if not isinstance(entry, dict) else entry
        gpu_class = entry.get("class")
        if gpu_class is None:
            if not string(entry, "name", obj, f"spec.gpus[{index}]"):
                raise ShapeError.at(obj, f"spec.gpus[{index}]", "names neither a class nor a device name")
            continue  # a device-plugin entry: not budgeted
        if not isinstance(gpu_class, str) or not _is_class_name(gpu_class):
            raise ShapeError.at(
                obj, f"spec.gpus[{index}].class", f"{gpu_class!r} is not a GPU class name (a DNS-1123 label)"
            )
        count_given = "count" in entry
        count = entry.get("count", 1)
        if type(count) is not int or count < 0:
            try:
                count = parse_budget_value(count)
            except InvalidBudgetValue:
                raise ShapeError.at(
                    obj, f"spec.gpus[{index}].count", f"{entry['count']!r} is not a whole, non-negative number"
                ) from None
        entries.append(ClassEntry(index, gpu_class, count, count_given))
    max_replicas = 1
    if kind == KUBERNETES_NODES and entries:
        raw = spec.get("maxReplicas")
        if raw is None:
            raise ShapeError.at(obj, "spec.maxReplicas", "is required to reserve GPUs for a worker pool")
        try:
            max_replicas = parse_budget_value(raw)
        except InvalidBudgetValue:
            raise ShapeError.at(obj, "spec.maxReplicas", f"{raw!r} is not a whole, non-negative number") from None
    reservations: dict[str, int] = {}
    for entry in entries:
        reservations[entry.gpu_class] = reservations.get(entry.gpu_class, 0) + entry.count * max_replicas
    return Workload(kind, namespace, name, tuple(entries), max_replicas, reservations)
