"""The post-render rules as pure decisions over parsed values.

Each function decides; `pipeline` applies the decisions to the text. The Flux
patch generator reaches the same decisions through `post_render` itself.
"""

from __future__ import annotations

import re
from collections import namedtuple
from collections.abc import Mapping

from cozyrender.entitlement import (
    PARENT_ANNOTATION,
    REQUESTED_ANNOTATION,
    VGPU_LABEL,
    flag_value,
    is_entitled,
)
from cozyrender.keys import in_budget_domain, quota_key_problem
from cozyrender.values_secret import VALUES_KEY

CLUSTER_VGPU = "gpu-vgpu"
NAMESPACE_VGPU = "vgpu"


class RuleError(ValueError):
    """Input a rule refuses; the pipeline names the document."""


class QuotaDecision(namedtuple("QuotaDecision", "removed malformed drop keeps")):
    """What happens to one ResourceQuota's `spec.hard`: the budget keys taken
    out (document order), the malformed ones among them as (key, reason),
    whether nothing ordinary is left so the whole quota goes, and whether it
    stays holding keys."""

    __slots__ = ()

    @property
    def changed(self) -> bool:
        return bool(self.removed)


# The common well-formed budget keys (`keys.quota_key_problem` says None for
# each), told apart in one match: a quota of tens of thousands of keys is
# mostly these. Any other key in the domain is judged by quota_key_problem.
_WELL_FORMED = re.compile(r"(?:requests\.|limits\.)?(?!requests\.|limits\.)"
                          r"(?:[a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?\.)?gpuclass\.cozystack\.io/devices\Z")


def decide_quota(hard_keys: list) -> QuotaDecision:
    """Budget keys leave a quota; a quota left empty by that is dropped.

    A quota that declared nothing to begin with is not ours to drop."""
    removed = tuple(key for key in hard_keys if isinstance(key, str) and in_budget_domain(key))
    well_formed = _WELL_FORMED.match
    malformed = tuple(
        (key, problem) for key in removed if not well_formed(key) and (problem := quota_key_problem(key)) is not None
    )
    drop = bool(removed) and len(removed) == len(hard_keys)
    return QuotaDecision(removed, malformed, drop, keeps=bool(hard_keys) and not drop)


def limit_ranges_dropped(namespace: str | None, dropped_quota_ns: set, kept_quota_ns: set) -> bool:
    """A GPU-only tenant gets no LimitRange: drop those of a namespace whose
    quotas were all dropped, keep them where any quota keeps an ordinary key."""
    return namespace in dropped_quota_ns and namespace not in kept_quota_ns


def tenant_entitlement(annotations: Mapping | None) -> bool | None:
    """The effective vGPU entitlement of a tenant namespace, from its two
    render inputs; None when the Namespace carries neither (not a tenant
    namespace, or one already post-rendered)."""
    annotations = annotations or {}
    present = [key for key in (REQUESTED_ANNOTATION, PARENT_ANNOTATION) if key in annotations]
    if not present:
        return None
    if len(present) == 1:
        missing = PARENT_ANNOTATION if present[0] == REQUESTED_ANNOTATION else REQUESTED_ANNOTATION
        raise RuleError(f"annotation {present[0]} is set but {missing} is missing; a tenant namespace carries both")
    flags = []
    for key in (REQUESTED_ANNOTATION, PARENT_ANNOTATION):
        value = annotations[key]
        if value not in ("true", "false"):
            raise RuleError(f'annotation {key} must be the string "true" or "false", not {value!r}')
        flags.append(value == "true")
    return is_entitled(*flags)


TENANT_ROOT = "tenant-root"
TENANT_PREFIX = "tenant-"
ANCESTOR_LABEL = "tenant.cozystack.io/tenant-root"
HOST_LABEL = "namespace.cozystack.io/host"


def is_stock_tenant_namespace(name: object, labels: Mapping | None, annotations: Mapping | None) -> bool:
    """Whether a Namespace is a Cozystack tenant namespace rendered by a chart
    that knows nothing of the vGPU (Cozystack's own): named `tenant-root` or
    `tenant-...`, carrying the `tenant.cozystack.io/tenant-root` ancestor label
    or the `namespace.cozystack.io/host` label, with neither render input nor
    the `namespace.cozystack.io/vgpu` label. Such a tenant is not entitled:
    passing it through would leave its vGPU state to whatever was there
    before. (With the label and no inputs it is post-rendered output, and
    passes unchanged, so post-rendering stays idempotent.)"""
    labels = labels or {}
    annotations = annotations or {}
    if not isinstance(name, str) or not (name == TENANT_ROOT or name.startswith(TENANT_PREFIX)):
        return False
    if ANCESTOR_LABEL not in labels and HOST_LABEL not in labels:
        return False
    return (VGPU_LABEL not in labels and REQUESTED_ANNOTATION not in annotations
            and PARENT_ANNOTATION not in annotations)


class ValuesDecision(namedtuple("ValuesDecision", "set_namespace_vgpu remove_namespace_vgpu remove_cluster_vgpu")):
    """Edits of a tenant's `cozystack-values` values.yaml: write
    `_namespace.vgpu: true`; remove a stale or spoofed `_namespace.vgpu`;
    remove `_cluster.gpu-vgpu` (it stays only when on)."""

    __slots__ = ()

    @property
    def changed(self) -> bool:
        return self.set_namespace_vgpu or self.remove_namespace_vgpu or self.remove_cluster_vgpu


def decide_values(values: object, entitled: bool) -> ValuesDecision:
    """`_namespace.vgpu: true` exactly when entitled; `_cluster.gpu-vgpu`
    kept only when on (true or "true"), since `_cluster` reaches every tenant
    and a key that is always there would upgrade every release. An empty
    `_cluster` that is not a mapping ("", [], 0, false) is no platform values:
    Cozystack's tenant chart copies `_cluster` verbatim and reads an empty one
    as none, and nothing here edits it."""
    if values is None:
        values = {}
    if not isinstance(values, Mapping):
        raise RuleError(f"{VALUES_KEY} is not a mapping")
    namespace = values.get("_namespace")
    cluster = values.get("_cluster")
    if not cluster and cluster is not None and not isinstance(cluster, Mapping):
        cluster = None
    for name, section in (("_namespace", namespace), ("_cluster", cluster)):
        if section is not None and not isinstance(section, Mapping):
            raise RuleError(f"{VALUES_KEY}: {name} is not a mapping")
    namespace = namespace or {}
    cluster = cluster or {}
    has_vgpu = NAMESPACE_VGPU in namespace
    current_ok = namespace.get(NAMESPACE_VGPU) is True
    cluster_on = flag_value(cluster.get(CLUSTER_VGPU)) is True
    return ValuesDecision(
        set_namespace_vgpu=entitled and not current_ok,
        remove_namespace_vgpu=has_vgpu and not entitled,
        remove_cluster_vgpu=CLUSTER_VGPU in cluster and not cluster_on,
    )
