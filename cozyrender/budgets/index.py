"""The state, indexed once for the budget rules.

`index_state(objects)` sorts the objects into dicts keyed by namespace and
computes the per-pool aggregates every check reads: devices reserved per
class in each budget pool, the charges of carving tenants to each pool
root, and ordinary usage per pool under the keys its root declares. A
single write check then reads a handful of entries (the namespace's
ancestors, one pool's aggregates) and never walks the whole state; only
the declaration gate also walks the written tenant's own subtree.

Two pool senses (see the design page):
- budget keys: a tenant declaring any key is a pool root;
- ordinary keys: only a tenant declaring a key outside the budget domain is
  one, so a GPU-only tenant stays in its parent's pool for cpu, memory...

Pure: the index is built from the objects and never changed afterwards.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING

from cozyrender.gcpause import collector_paused
from cozyrender.gpuclass.classes import identity_group, is_gpuclass
from cozyrender.keys import BudgetKey
from cozyrender.kube.identity import CLUSTER_SCOPED, Copies, identity_of
from cozyrender.kube.shape import ShapeError, got, mapping, ref
from cozyrender.values_secret import is_values_secret

if TYPE_CHECKING:
    from cozyrender.gpuclass.conflicts import Conflict

from .model import (
    APPS_GROUP,
    KUBERNETES_NODES,
    TENANT,
    VM_INSTANCE,
    WORKLOAD_KINDS,
    Declaration,
    Workload,
    metadata_name_namespace,
    parse_declaration,
    parse_workload,
)
from .charges import ALL_CLASSES, NO_CHARGE, Charge, budget_charge, caps, tenant_charge
from .tree import ROOT_NAMESPACE, ancestors, is_malformed_tenant_namespace, is_tenant_namespace, parent_namespace
from .usage import usage_under

@dataclass
class Contribution:
    """What one subtree adds to a pool: reserved devices per class, charges
    towards budget keys, ordinary usage and charges per key."""

    reserved: dict[str, int] = field(default_factory=dict)
    charges: Charge = field(default_factory=Charge)
    usage: dict[str, Fraction] = field(default_factory=dict)
    ordinary_charges: dict[str, Fraction] = field(default_factory=dict)


@dataclass
class BudgetState:
    """The indexed state. Build it with `index_state`; treat it as read-only.

    - `declarations`: tenant namespace -> its Tenant's Declaration
    - `workloads`: (kind, namespace, name) -> Workload
    - `reserved`: namespace -> class -> devices reserved there
    - `children`: namespace -> the known child namespaces (by name)
    - `pool_reserved`: budget pool root -> class -> devices reserved in its pool
    - `charges`: budget pool root -> the summed Charge of its carving tenants
    - `tenant_charges`: carving tenant's namespace -> its own Charge
      (`tenant_charge`: never less than what its pool holds)
    - `ordinary_charges`: ordinary pool root -> quota key -> charges of carving tenants
    - `ordinary_charge`: carving tenant's namespace -> quota key -> its charge:
      its declared value, or what its own pool already holds (usage plus its
      carving tenants' charges) when that is more (never less than it takes)
    - `pool_usage`: ordinary pool root -> quota key -> usage of its pool
    - `usage`: namespace -> usage under the keys its ordinary pool root declares
    - `quotas`, `pods`: namespace -> its ResourceQuotas / Pods, read again
      only for a key no pool root above the namespace declares
    - `gpuclasses`: GPUClass name -> object; `conflicts`: class name -> its
      Conflict, for the classes in conflict over their resource name;
      `class_resources`: device-plugin resource name -> the classes advertising it;
      `platform_vgpu`: the root's vGPU entitlement read from the state (None
      when the state holds neither the tenant-root Namespace label nor the
      platform values; False, with `platform_disagreement` saying why, when
      they disagree)
    - `namespace_vgpu`: tenant namespace (below the root) -> what the
      `namespace.cozystack.io/vgpu` label of its Namespace in the state says
      (the entitlement the platform rendered for it; a source that must agree
      with the Tenant chain)
    - `malformed_namespaces`: namespace named like a tenant's that no tenant
      can own -> the objects found there (they are in no pool)
    """

    declarations: dict[str, Declaration] = field(default_factory=dict)
    workloads: dict[tuple[str, str, str], Workload] = field(default_factory=dict)
    reserved: dict[str, dict[str, int]] = field(default_factory=dict)
    children: dict[str, set[str]] = field(default_factory=dict)
    pool_reserved: dict[str, dict[str, int]] = field(default_factory=dict)
    charges: dict[str, Charge] = field(default_factory=dict)
    tenant_charges: dict[str, Charge] = field(default_factory=dict)
    ordinary_charges: dict[str, dict[str, Fraction]] = field(default_factory=dict)
    pool_usage: dict[str, dict[str, Fraction]] = field(default_factory=dict)
    usage: dict[str, dict[str, Fraction]] = field(default_factory=dict)
    gpuclasses: dict[str, dict] = field(default_factory=dict)
    conflicts: dict[str, Conflict] = field(default_factory=dict)
    platform_vgpu: bool | None = None
    platform_disagreement: str | None = None
    class_resources: dict[str, tuple[str, ...]] = field(default_factory=dict)
    malformed_namespaces: dict[str, list[str]] = field(default_factory=dict)
    namespace_vgpu: dict[str, bool] = field(default_factory=dict)
    ordinary_charge: dict[str, dict[str, Fraction]] = field(default_factory=dict)
    quotas: dict[str, list[Mapping]] = field(default_factory=dict)
    pods: dict[str, list[Mapping]] = field(default_factory=dict)

    # -- pool roots ---------------------------------------------------------

    def budget_root(self, namespace: str) -> str | None:
        """The nearest namespace at or above `namespace` whose tenant
        declares any key: the root of its pool for budget keys."""
        for candidate in ancestors(namespace):
            declaration = self.declarations.get(candidate)
            if declaration is not None and declaration.is_budget_root:
                return candidate
        return None

    def ordinary_root(self, namespace: str) -> str | None:
        """The nearest namespace at or above `namespace` whose tenant
        declares a key outside the budget domain: its ordinary pool root."""
        for candidate in ancestors(namespace):
            declaration = self.declarations.get(candidate)
            if declaration is not None and declaration.is_ordinary_root:
                return candidate
        return None

    def reserved_for(self, root: str, key: BudgetKey) -> int:
        """Devices reserved in `root`'s pool for the classes `key` covers."""
        return covered(self.pool_reserved.get(root, {}), key)

    def charged_to(self, root: str, key: BudgetKey) -> int:
        return self.charges.get(root, NO_CHARGE).for_key(key)

    # -- subtrees -----------------------------------------------------------

    def subtree_contribution(self, namespace: str, root: str | None, ordinary: bool) -> Contribution:
        """What `namespace` and its subtree currently add to `root`'s pool
        (budget sense, or ordinary sense when `ordinary`; `root` None for
        the part in no pool): the part that leaves `root`'s pool when the
        tenant of `namespace` becomes a pool root of its own. Walks only
        that subtree's namespaces."""
        find_root = self.ordinary_root if ordinary else self.budget_root
        contribution = Contribution()
        own = self.declarations.get(namespace)
        is_root = own is not None and (own.is_ordinary_root if ordinary else own.is_budget_root)
        if is_root:
            # Already its own pool root: only its own charge is in `root`'s figures.
            if find_root(parent_namespace(namespace) or "") == root:
                self._add_charge(contribution, own, ordinary)
            return contribution
        if find_root(namespace) != root:
            return contribution
        stack = [namespace]
        while stack:
            current = stack.pop()
            declaration = self.declarations.get(current)
            if current != namespace and declaration is not None and (
                declaration.is_ordinary_root if ordinary else declaration.is_budget_root
            ):
                self._add_charge(contribution, declaration, ordinary)
                continue
            if ordinary:
                for key, value in self.usage.get(current, {}).items():
                    contribution.usage[key] = contribution.usage.get(key, Fraction(0)) + value
            else:
                for gpu_class, count in self.reserved.get(current, {}).items():
                    contribution.reserved[gpu_class] = contribution.reserved.get(gpu_class, 0) + count
            stack.extend(self.children.get(current, ()))
        return contribution

    def _add_charge(self, contribution: Contribution, declaration: Declaration, ordinary: bool) -> None:
        if ordinary:
            for key, value in self.ordinary_charge.get(declaration.namespace, {}).items():
                contribution.ordinary_charges[key] = contribution.ordinary_charges.get(key, Fraction(0)) + value
        else:
            contribution.charges.add(self.tenant_charges.get(declaration.namespace, NO_CHARGE))

    def usage_of(self, namespace: str, keys: Iterable[str]) -> dict[str, Fraction]:
        """`namespace`'s usage under quota keys `keys`: indexed where its
        ordinary pool root declares them, read from its quotas and pods
        otherwise."""
        known = self.usage.get(namespace, {})
        missing = [key for key in keys if key not in known]
        if not missing or (namespace not in self.quotas and namespace not in self.pods):
            return {key: known.get(key, Fraction(0)) for key in keys}
        used = usage_under(missing, self.quotas.get(namespace), self.pods.get(namespace))
        return {key: known[key] if key in known else used[key] for key in keys}

    def held_below(self, namespace: str, keys: Iterable[str]) -> dict[str, Fraction]:
        """What a pool rooted at `namespace` holds, per quota key of `keys`,
        whether or not its tenant is an ordinary pool root today: the usage
        of `namespace` and of every descendant up to the next ordinary pool
        roots, plus those roots' charges for the keys they declare. Walks
        that subtree only."""
        keys = list(keys)
        held = {key: Fraction(0) for key in keys}
        stack = [namespace]
        while stack:
            current = stack.pop()
            declaration = self.declarations.get(current)
            if current != namespace and declaration is not None and declaration.is_ordinary_root:
                for key, value in self.ordinary_charge.get(current, {}).items():
                    if key in held:
                        held[key] += value
                continue
            for key, value in self.usage_of(current, keys).items():
                held[key] += value
            stack.extend(self.children.get(current, ()))
        return held


def key_order(key: BudgetKey) -> tuple[bool, str]:
    """The one order of budget keys in answers and findings: the class-less
    key first (the pool's total), then per class by name."""
    return key.gpu_class is not None, key.gpu_class or ""


def covered(per_class: Mapping[str, int], key: BudgetKey) -> int:
    """The devices of `per_class` (class -> count) in the classes `key` covers."""
    if key.gpu_class is None:
        return sum(per_class.values())
    return per_class.get(key.gpu_class, 0)


def _platform_vgpu_from_values(secret: Mapping) -> bool | None:
    """`_cluster.gpu-vgpu` of tenant-root's `cozystack-values` Secret, from
    `stringData` or base64 `data` of its `values.yaml`."""
    from cozyrender.entitlement import flag_value
    from cozyrender.values_secret import ValuesSecretError, read_values, values_text

    for key in ("stringData", "data"):  # the reader expects maps there
        mapping(secret, key, secret)
    try:
        if values_text(secret) is None:
            return None
        values = read_values(secret)
    except ValuesSecretError as err:
        raise ShapeError(f"Secret tenant-root/cozystack-values: {err}", secret) from None
    cluster = values.get("_cluster")
    if not isinstance(cluster, Mapping) or "gpu-vgpu" not in cluster:
        return False  # written only when on
    return bool(flag_value(cluster["gpu-vgpu"]))


def index_state(objects: Iterable[Mapping]) -> BudgetState:
    """Index `objects` (Tenants, VMInstances, KubernetesNodes, ResourceQuotas,
    Pods, GPUClasses, the tenant-root Namespace and its `cozystack-values`
    Secret; anything else is ignored) for the budget rules.

    Raises ShapeError for an object the rules cannot read, for two
    different copies of one object, and for two Tenants owning the same
    namespace. An object's identity is its API group, kind, namespace and
    name, whatever its version, and without a namespace for a cluster-scoped
    kind (a stray `metadata.namespace` there is ignored); identical copies,
    as from overlapping inputs, are fine, whatever their versions. The
    result does not depend on object order.
    """
    with collector_paused():
        return _index_state(objects)


def _index_state(objects: Iterable[Mapping]) -> BudgetState:
    state = BudgetState()
    copies = Copies()
    quotas: dict[str, list[Mapping]] = {}
    pods: dict[str, list[Mapping]] = {}
    namespace_label: bool | None = None
    values_vgpu: bool | None = None
    for obj in objects:
        kind = obj.get("kind")
        if type(kind) is not str or kind not in _INDEXED_KINDS:  # (a list or map is no kind at all)
            continue
        meta = obj.get("metadata")
        if type(meta) is not dict:
            raise ShapeError.at(obj, "metadata", "is missing" if meta is None else f"is not an object (got {got(meta)})")
        api_version, namespace, name = obj.get("apiVersion"), meta.get("namespace"), meta.get("name")
        # Checked before they key a dict: every object here is read by name.
        if type(name) is not str or not name:
            raise ShapeError.at(obj, "metadata.name", "is missing" if name is None else f"is not a string (got {got(name)})")
        if namespace is not None and type(namespace) is not str:
            raise ShapeError.at(obj, "metadata.namespace", f"is not a string (got {got(namespace)})")
        if api_version is not None and type(api_version) is not str:
            raise ShapeError.at(obj, "apiVersion", f"is not a string (got {got(api_version)})")
        group = identity_group(obj)
        if not copies.is_new(obj, identity_of(obj, group)):
            continue
        scoped = kind not in CLUSTER_SCOPED
        if scoped and namespace and is_malformed_tenant_namespace(namespace):
            state.malformed_namespaces.setdefault(namespace, []).append(ref(obj))
        if kind == TENANT and group == APPS_GROUP:
            declaration = parse_declaration(obj)
            if is_malformed_tenant_namespace(declaration.namespace) and declaration.namespace != namespace:
                state.malformed_namespaces.setdefault(declaration.namespace, []).append(ref(obj))
            other = state.declarations.get(declaration.namespace)
            if other is not None:
                raise ShapeError.at(
                    obj, "", f"namespace {declaration.namespace} is also owned by Tenant {other.created_in}/{other.tenant}"
                )
            state.declarations[declaration.namespace] = declaration
        elif kind in WORKLOAD_KINDS and group == APPS_GROUP:
            workload = parse_workload(obj)
            state.workloads[workload.identity] = workload
            if workload.reservations:
                per_class = state.reserved.setdefault(workload.namespace, {})
                for gpu_class, count in workload.reservations.items():
                    per_class[gpu_class] = per_class.get(gpu_class, 0) + count
        elif kind == "Pod" and group == "":
            if not namespace:
                metadata_name_namespace(obj)  # raises, naming the object
            pods.setdefault(namespace, []).append(obj)
        elif kind == "ResourceQuota" and group == "":
            namespace, _ = metadata_name_namespace(obj)
            quotas.setdefault(namespace, []).append(obj)
        elif is_gpuclass(obj):
            _check_gpuclass(obj)
            state.gpuclasses[name] = obj  # type: ignore[assignment]
        elif kind == "Namespace" and group == "" and name == ROOT_NAMESPACE:
            from cozyrender.entitlement import VGPU_LABEL, flag_value

            labels = mapping(meta, "labels", obj, "metadata")
            if VGPU_LABEL in labels:
                namespace_label = bool(flag_value(labels[VGPU_LABEL]))
        elif kind == "Namespace" and group == "" and is_tenant_namespace(name):
            from cozyrender.entitlement import VGPU_LABEL, flag_value

            labels = mapping(meta, "labels", obj, "metadata")
            if VGPU_LABEL in labels:  # anything but true is not entitled
                state.namespace_vgpu[name] = bool(flag_value(labels[VGPU_LABEL]))
        elif kind == "Secret" and group == "" and is_values_secret(obj, ROOT_NAMESPACE):
            values_vgpu = _platform_vgpu_from_values(obj)
    if state.gpuclasses:
        from cozyrender.gpuclass.classes import resource_name
        from cozyrender.gpuclass.conflicts import find_conflicts

        state.conflicts = find_conflicts(state.gpuclasses.values())
        by_resource: dict[str, list[str]] = {}
        for class_name, gpuclass in state.gpuclasses.items():
            resource = resource_name(gpuclass)
            if resource:
                by_resource.setdefault(resource, []).append(class_name)
        state.class_resources = {resource: tuple(sorted(names)) for resource, names in by_resource.items()}
    for found in state.malformed_namespaces.values():
        found.sort()
    # The label is what the platform rendered, the values its input: both must say true.
    from cozyrender.entitlement import agreed_entitlement

    state.platform_vgpu, state.platform_disagreement = agreed_entitlement({
        "the tenant-root Namespace label": namespace_label,
        "_cluster.gpu-vgpu in tenant-root/cozystack-values": values_vgpu,
    })

    known = set(state.declarations) | set(state.reserved) | set(quotas) | set(pods)
    for namespace in known:
        child = namespace
        for parent in ancestors(parent_namespace(namespace) or ""):
            siblings = state.children.setdefault(parent, set())
            if child in siblings:
                break
            siblings.add(child)
            child = parent

    # Budget pools: reservations and the charges of carving tenants.
    budget_roots: dict[str, str | None] = {}

    def budget_root(namespace: str) -> str | None:
        if namespace not in budget_roots:
            budget_roots[namespace] = state.budget_root(namespace)
        return budget_roots[namespace]

    for namespace, per_class in state.reserved.items():
        root = budget_root(namespace)
        if root is not None:
            pool = state.pool_reserved.setdefault(root, {})
            for gpu_class, count in per_class.items():
                pool[gpu_class] = pool.get(gpu_class, 0) + count
    # Budget carve-outs, deepest first: a tenant's charge depends on what its
    # own pool holds, its carving tenants' charges included.
    carving_budgets = [
        (namespace.count("-"), namespace) for namespace, declaration in state.declarations.items()
        if declaration.budgets and parent_namespace(namespace) is not None
    ]
    for _, namespace in sorted(carving_budgets, reverse=True):
        charge = tenant_charge(
            state.declarations[namespace], state.pool_reserved.get(namespace, {}),
            state.charges.get(namespace, NO_CHARGE),
        )
        state.tenant_charges[namespace] = charge
        root = budget_root(parent_namespace(namespace) or "")
        if root is not None:
            state.charges.setdefault(root, Charge()).add(charge)

    # Ordinary pools: usage of each member namespace under its root's keys.
    for namespace in set(quotas) | set(pods):
        if not is_tenant_namespace(namespace):
            continue
        root = state.ordinary_root(namespace)
        if root is None:
            continue
        used = usage_under(state.declarations[root].ordinary, quotas.get(namespace), pods.get(namespace))
        state.usage[namespace] = used
        pool = state.pool_usage.setdefault(root, {})
        for key, value in used.items():
            pool[key] = pool.get(key, Fraction(0)) + value
    state.quotas, state.pods = quotas, pods

    # Ordinary carve-outs, deepest first: a carving tenant's charge is its
    # declared value, or what its own pool holds when that is more.
    carving = [
        (namespace.count("-"), namespace) for namespace, declaration in state.declarations.items()
        if declaration.ordinary and parent_namespace(namespace) is not None
    ]
    for _, namespace in sorted(carving, reverse=True):
        declaration = state.declarations[namespace]
        root = state.ordinary_root(parent_namespace(namespace) or "")
        usage = state.pool_usage.get(namespace, {})
        below = state.ordinary_charges.get(namespace, {})
        charge = {
            key: max(value, usage.get(key, Fraction(0)) + below.get(key, Fraction(0)))
            for key, value in declaration.ordinary.items()
        }
        state.ordinary_charge[namespace] = charge
        if root is not None:
            pool_ordinary = state.ordinary_charges.setdefault(root, {})
            for key, value in charge.items():
                pool_ordinary[key] = pool_ordinary.get(key, Fraction(0)) + value
    return state


def _check_gpuclass(obj: Mapping) -> None:
    """Read every field a write check reads from a state's class now, so a
    malformed class is reported as bad input whatever the write names."""
    from cozyrender.gpuclass.classes import mode, resource_name, tolerations
    from cozyrender.gpuclass.conflicts import creation_time

    resource_name(obj), mode(obj), tolerations(obj), creation_time(obj)


_INDEXED_KINDS = frozenset({
    TENANT, VM_INSTANCE, KUBERNETES_NODES, "ResourceQuota", "Pod", "GPUClass", "Namespace", "Secret",
})

__all__ = [
    "ALL_CLASSES", "NO_CHARGE", "BudgetState", "Charge", "Contribution", "budget_charge", "caps", "covered",
    "index_state", "key_order", "tenant_charge",
]
