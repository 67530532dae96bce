"""What the budget rules read from objects: a Tenant's declaration and a
workload's GPU reservation.

Declarations are split the way the rules need them: valid budget keys with
whole device counts, ordinary keys with exact quantities, and whatever is
malformed with the reason (the declaration gate refuses those, the audit
reports them). Reservations follow `spec.gpus`: class entries
`{class, count}` (count defaults to 1), times `spec.maxReplicas` for a
KubernetesNodes worker pool; a Kubernetes cluster's node groups
(`spec.nodeGroups.<group>`) each reserve their `gpus` entries times their
own `maxReplicas`, like a worker pool; an entry naming only a device-plugin
`name` reserves nothing.

Pure functions, no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from functools import lru_cache
from typing import NamedTuple

import re

from cozyrender.keys import (
    BudgetKey,
    BudgetValueTooLarge,
    InvalidBudgetKey,
    InvalidBudgetValue,
    declared_in_budget_domain,
    is_class_name,
    parse_budget_key,
    parse_budget_value,
)
from cozyrender.kube.quantity import InvalidQuantity, parse_quantity
from cozyrender.kube.shape import ShapeError, as_mapping, got, mapping, string

from .bounds import MAX_COUNT, TOO_LARGE, past_bound, quantity_text_problem
from cozyrender.namespaces import owned_namespace
from .usage import usage_key

# Cozystack's grammar for tenant names: the dash separates the levels of a
# tenant namespace (`tenant-a-b`), so a name may not hold one.
TENANT_NAME = re.compile(r"[a-z][a-z0-9]*\Z")

# The all-classes budget key (`gpuclass.cozystack.io/devices`).
ALL_CLASSES = BudgetKey(None)

APPS_GROUP = "apps.cozystack.io"
TENANT = "Tenant"
VM_INSTANCE = "VMInstance"
KUBERNETES_NODES = "KubernetesNodes"
KUBERNETES = "Kubernetes"  # a managed cluster: its node groups are worker pools
WORKLOAD_KINDS = (VM_INSTANCE, KUBERNETES_NODES, KUBERNETES)


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
    budget keys (with the platform's `gpu-budgets-nest` switch on, one that
    declares a key in the budget domain: `is_budget_root`); one that
    declares a key outside the domain is a pool root for ordinary keys.
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
    unusable: dict[object, str] = field(default_factory=dict)

    def is_budget_root(self, nest: bool = False) -> bool:
        """Whether the tenant heads a pool for budget keys: the seed's rule,
        any key declared at all (so a tenant declaring only `cpu` leaves its
        parent's GPU pool); with the platform's `gpu-budgets-nest` switch on
        (`nest`), a key in the budget domain, as ordinary pool roots are
        decided by ordinary keys alone. Read it through
        `BudgetState.is_budget_root`, which knows the switch."""
        if nest:
            return any(declared_in_budget_domain(key) for key in self.declared_keys)
        return bool(self.declared_keys)

    @property
    def is_ordinary_root(self) -> bool:
        return any(not declared_in_budget_domain(key) for key in self.declared_keys)

    @property
    def ref(self) -> str:
        """The Tenant object declaring this, as messages name it: kind, the
        namespace it is created in, its name."""
        return f"Tenant {self.created_in}/{self.tenant}"

    def unusable_note(self, key: object) -> str:
        """For a message about `key` (a BudgetKey or a quota key): why its
        value is counted as 0, when it is."""
        why = self.unusable.get(key)
        return f" (counted as 0 until fixed: {why})" if why else ""


def parse_declaration(tenant: Mapping) -> Declaration:
    """Read a Tenant object. Malformed keys and values are collected in
    `problems`, never raised: refusing them is the declaration gate's job.

    An unusable value caps at zero, never leaves the pool uncapped (issue 11
    item 5): a valid budget key with a value that is not a whole number of
    devices counts as 0 for its key; a malformed key in the budget domain
    counts as 0 for the all-classes key (what it meant to cap is unknown);
    an ordinary value that is not a quantity counts as 0 for its key. So
    while a state holds one, growth under it is refused, naming the value
    (`unusable`). A name outside Cozystack's grammar, and numbers past their
    bounds (`bounds`), are ShapeErrors: bad input, not a declaration."""
    from cozyrender.entitlement import flag_value

    created_in, name = metadata_name_namespace(tenant)
    if not TENANT_NAME.match(name):
        raise ShapeError.at(
            tenant, "metadata.name",
            f"{got(name)} is not a tenant name: lower-case letters and digits, starting with a letter "
            "(no '-': it separates the levels of a tenant namespace)",
        )
    spec = mapping(tenant, "spec", tenant)
    quotas = mapping(spec, "resourceQuotas", tenant, "spec")
    budgets: dict[BudgetKey, int] = {}
    ordinary: dict[str, Fraction] = {}
    declared_as: dict[str, str] = {}
    problems: list[tuple[str, str]] = []
    unusable: dict[object, str] = {}

    def cap_at_zero(key: object, why: str) -> None:
        unusable.setdefault(key, why)

    for key, value in quotas.items():
        key = str(key)
        where = f"spec.resourceQuotas[{key!r}]"
        if declared_in_budget_domain(key):
            try:
                parsed = parse_budget_key(key)
            except InvalidBudgetKey as err:
                problems.append((key, f"unsupported GPU budget key {err}"))
                cap_at_zero(ALL_CLASSES, f"unsupported GPU budget key {key!r}")
                continue
            problem = quantity_text_problem(value)
            if problem is not None:
                raise ShapeError.at(tenant, where, problem)
            try:
                budgets[parsed] = parse_budget_value(value)
            except BudgetValueTooLarge as err:
                raise ShapeError.at(tenant, where, str(err)) from None
            except InvalidBudgetValue as err:
                if _too_large(value):
                    raise ShapeError.at(tenant, where, TOO_LARGE) from None
                problems.append((key, f"invalid GPU budget for {key!r}: {err}"))
                cap_at_zero(parsed, f"{key!r} is {got(value)}")
        else:
            problem = quantity_text_problem(value)
            if problem is not None:
                raise ShapeError.at(tenant, where, problem)
            try:
                quantity = parse_quantity(value)
            except InvalidQuantity as err:
                problems.append((key, f"{key!r}: {err}"))
                cap_at_zero(usage_key(key), f"{key!r} is {got(value)}")
                declared_as.setdefault(usage_key(key), key)
                continue
            if past_bound(quantity):
                raise ShapeError.at(tenant, where, TOO_LARGE)
            if quantity < 0:
                problems.append((key, f"{key!r}: {value!r} is negative"))
                cap_at_zero(usage_key(key), f"{key!r} is negative")
                declared_as.setdefault(usage_key(key), key)
                continue
            rendered = usage_key(key)
            other = declared_as.get(rendered)
            if other is not None:
                problems.append((key, f"{key!r} renders to the same quota key as {other!r} ({rendered})"))
                if rendered in ordinary and quantity >= ordinary[rendered]:
                    continue
            ordinary[rendered] = quantity
            declared_as[rendered] = key
    for key in unusable:  # counted as 0, whatever else the tenant declares for it
        if isinstance(key, BudgetKey):
            budgets[key] = 0
        else:
            ordinary[key] = Fraction(0)
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
        unusable=unusable,
    )


def _too_large(value: object) -> bool:
    """Whether `value`, not a whole number of devices, is a quantity past the
    bound (`9999999999999999999999Ei`): bad input, not an unusable budget."""
    try:
        return past_bound(parse_quantity(value))
    except InvalidQuantity:
        return False


# Workloads name a handful of classes: test each name once.
_is_class_name = lru_cache(maxsize=4096)(is_class_name)


class ClassEntry(NamedTuple):
    """One class entry of a `gpus` list: its index, class and per-replica
    count, and the device-plugin `name` it gives beside the class, if any
    (the VM charts render `name` as the device the VM gets: it must be the
    class's); `path` is the entry's field (`spec.gpus[0]`,
    `spec.nodeGroups.md0.gpus[0]`), `replicas` what its count is multiplied
    by (a pool's or node group's maxReplicas; 1 for a VM) and
    `replicas_path` the field that number is read from (None for a VM)."""

    index: int
    gpu_class: str
    count: int
    count_given: bool
    device: str | None = None
    path: str = ""
    replicas: int = 1
    replicas_path: str | None = None


class Workload(NamedTuple):
    """A VMInstance, KubernetesNodes or Kubernetes object as the budget check
    sees it.

    `reservations` maps each class to the devices it reserves: the summed
    counts of its entries, each times its replicas. (A NamedTuple: a state
    holds a hundred thousand of them.)
    """

    kind: str
    namespace: str
    name: str
    entries: tuple[ClassEntry, ...]
    reservations: dict[str, int]
    # Entries naming only a device-plugin resource: (the entry's field, name).
    raw_names: tuple[tuple[str, str], ...] = ()
    # Per worker pool or node group giving both, with min more than max (a
    # shape Kubernetes would never run): (the field prefix, min, max).
    replicas_inverted: tuple[tuple[str, int, int], ...] = ()

    @property
    def identity(self) -> tuple[str, str, str]:
        return (self.kind, self.namespace, self.name)


def _whole(value: object, obj: Mapping, path: str, bound: int = MAX_COUNT) -> int:
    """A whole, non-negative number at most `bound` (a count or a replica
    number); ShapeError naming the field otherwise. An integer, as the apps'
    schemas type these fields (issue 19 item 4): the API server refuses
    `count: "2"` or `2.0`, so a state or write holding one was never
    admitted by it, and reading it as 2 would check an object no cluster
    runs."""
    if type(value) is not int:  # (bool is no int here either)
        raise ShapeError.at(obj, path, f"is not an integer (got {got(value)}), as the app's schema requires")
    if value < 0:
        raise ShapeError.at(obj, path, f"{got(value)} is not a whole, non-negative number")
    if value > bound:
        raise ShapeError.at(obj, path, f"is too large (at most {bound})")
    return value


def _replicas(obj: Mapping, spec: Mapping, prefix: str) -> tuple[int | None, tuple[tuple[str, int, int], ...]]:
    """A worker pool's (or node group's) maxReplicas, when given, and its
    replica range when inverted."""
    low, high = spec.get("minReplicas"), spec.get("maxReplicas")
    low = _whole(low, obj, f"{prefix}.minReplicas") if low is not None else None
    high = _whole(high, obj, f"{prefix}.maxReplicas") if high is not None else None
    inverted = ((prefix, low, high),) if low is not None and high is not None and low > high else ()
    return high, inverted


def _class_entries(
    obj: Mapping, spec: Mapping, prefix: str, replicas: int | None, replicas_path: str | None,
) -> tuple[list[ClassEntry], list[tuple[str, str]]]:
    """The class entries and device-plugin names of `spec.gpus` (`spec` the
    object's spec or a node group, `prefix` its field), each class entry
    multiplied by `replicas` (required, read from `replicas_path`, when a
    pool names classes; None for a VM: 1)."""
    gpus = spec.get("gpus")
    if not isinstance(gpus, list):
        if gpus is not None:
            raise ShapeError.at(obj, f"{prefix}.gpus", "is not a list")
        return [], []
    entries: list[ClassEntry] = []
    raw_names: list[tuple[str, str]] = []
    for index, entry in enumerate(gpus):
        path = f"{prefix}.gpus[{index}]"
        entry = as_mapping(entry, obj, path) if not isinstance(entry, dict) else entry
        gpu_class = entry.get("class")
        count = entry.get("count", 1)
        if type(count) is not int or not 0 <= count <= MAX_COUNT:
            count = _whole(count, obj, f"{path}.count")
        if gpu_class is None:
            device = string(entry, "name", obj, path)
            if not device:
                raise ShapeError.at(obj, path, "names neither a class nor a device name")
            raw_names.append((path, device))
            continue  # a device-plugin entry: not budgeted (the write check refuses it where budgets apply)
        if not isinstance(gpu_class, str) or not _is_class_name(gpu_class):
            raise ShapeError.at(obj, f"{path}.class", f"{got(gpu_class)} is not a GPU class name (a DNS-1123 label)")
        device = string(entry, "name", obj, path) if "name" in entry else None
        entries.append(ClassEntry(index, gpu_class, count, "count" in entry, device, path, 1, replicas_path))
    if entries and replicas_path is not None:
        if replicas is None:
            raise ShapeError.at(obj, replicas_path, "is required to reserve GPUs for a worker pool")
        entries = [entry._replace(replicas=replicas) for entry in entries]
    return entries, raw_names


def parse_workload(obj: Mapping) -> Workload:
    """Read a VMInstance, KubernetesNodes or Kubernetes object; ShapeError
    for a negative, fractional or too large count or replica number
    (`bounds`), an entry with neither `class` nor `name`, a class that is not
    a DNS-1123 label, or a worker pool or node group naming classes without
    a whole `maxReplicas`."""
    kind = obj.get("kind")
    if kind not in WORKLOAD_KINDS:
        raise ShapeError.at(obj, "", "not a VMInstance, KubernetesNodes or Kubernetes")
    namespace, name = metadata_name_namespace(obj)
    spec = mapping(obj, "spec", obj)
    entries: list[ClassEntry] = []
    raw_names: list[tuple[str, str]] = []
    inverted: tuple[tuple[str, int, int], ...] = ()
    if kind == VM_INSTANCE:
        entries, raw_names = _class_entries(obj, spec, "spec", None, None)
    elif kind == KUBERNETES_NODES:
        replicas, inverted = _replicas(obj, spec, "spec") if ("minReplicas" in spec or "maxReplicas" in spec) else (None, ())
        entries, raw_names = _class_entries(obj, spec, "spec", replicas, "spec.maxReplicas")
    else:
        groups = mapping(spec, "nodeGroups", obj, "spec")
        for group in sorted(groups, key=str):  # one order, whatever the object's
            prefix = f"spec.nodeGroups.{group}"
            node_group = as_mapping(groups[group], obj, prefix)
            replicas, group_inverted = _replicas(obj, node_group, prefix)
            inverted += group_inverted
            found, names = _class_entries(obj, node_group, prefix, replicas, f"{prefix}.maxReplicas")
            entries += found
            raw_names += names
    reservations: dict[str, int] = {}
    for entry in entries:
        reservations[entry.gpu_class] = reservations.get(entry.gpu_class, 0) + entry.count * entry.replicas
    return Workload(kind, namespace, name, tuple(entries), reservations, tuple(raw_names), inverted)
