"""The vGPU license contract, and the copier's decisions.

The contract (what a VM's side reads; docs/reference/license-contract.md):
- a vgpu class's `spec.license.secretRef` names the source Secret, which
  holds the license token under the key `token`;
- in every entitled namespace the copier keeps one Secret per vgpu class,
  named `vgpu-license-<class>`, type Opaque, labelled
  `app.kubernetes.io/managed-by: cozyrender-license-copier` and
  `gpuclass.cozystack.io/class: <class>`, annotated with its source
  (`license.gpuclass.cozystack.io/source: <namespace>/<name>`), with two keys,
  named as NVIDIA's guest driver and the GPU Operator's licensing
  configuration read them (mounted at /etc/nvidia/ClientConfigToken/ and
  /etc/nvidia/), so no guest image renames them:
    client_configuration_token.tok  the source's `token`, byte for byte
    gridd.conf                      `FeatureType=<spec.license.featureType>`
- a namespace is entitled when its `namespace.cozystack.io/vgpu` label is
  "true" and, for a tenant namespace, every ancestor tenant namespace's label
  is "true" too (the entitlement chain: a subtree loses its copies the moment
  its root does, without waiting for each level's label to be rewritten).

Ownership: a Secret is the copier's only when it carries the managed-by
label with the copier's value. A Secret of a copy's name without it is
foreign: never adopted, changed or deleted, only reported.

`plan(...)` returns the writes that bring the copies to the contract: it
never creates or updates a copy in a namespace that is not entitled, never
names a foreign Secret, and applying it reaches a fixed point (a property
test holds all three). Pure: no I/O.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from cozyrender.namespaces import ancestors, is_tenant_namespace
from cozyrender.entitlement import VGPU_LABEL

COPY_PREFIX = "vgpu-license-"
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY = "cozyrender-license-copier"
CLASS_LABEL = "gpuclass.cozystack.io/class"
SOURCE_ANNOTATION = "license.gpuclass.cozystack.io/source"
TOKEN_KEY = "token"  # the source's key
COPY_TOKEN_KEY = "client_configuration_token.tok"  # the copy's: what the guest driver reads
GRIDD_KEY = "gridd.conf"


def copy_name(class_name: str) -> str:
    return COPY_PREFIX + class_name


def gridd_conf(feature_type: int) -> str:
    """The gridd.conf a guest's NVIDIA licensing client reads (FeatureType only)."""
    return f"# Written by cozyrender's license copier from the GPUClass's spec.license.featureType.\n" \
           f"FeatureType={feature_type}\n"


def is_copy(secret: Mapping) -> bool:
    """The copier's own: named as a copy and labelled by the copier."""
    meta = secret.get("metadata") or {}
    labels = meta.get("labels") or {}
    return str(meta.get("name") or "").startswith(COPY_PREFIX) and labels.get(MANAGED_BY_LABEL) == MANAGED_BY


@dataclass(frozen=True)
class Source:
    """A vgpu class's license: where its source Secret is and its FeatureType."""

    gpu_class: str
    namespace: str
    name: str
    feature_type: int


def license_of(gpuclass: Mapping) -> Source | None:
    """The class's license when it is a vgpu class with a readable
    spec.license (the CRD requires one for vgpu); None otherwise."""
    spec = gpuclass.get("spec") if isinstance(gpuclass.get("spec"), dict) else {}
    license_ = spec.get("license") if isinstance(spec.get("license"), dict) else None
    if spec.get("mode") != "vgpu" or license_ is None:
        return None
    ref = license_.get("secretRef") if isinstance(license_.get("secretRef"), dict) else {}
    namespace, name, feature = ref.get("namespace"), ref.get("name"), license_.get("featureType")
    if not (isinstance(namespace, str) and namespace and isinstance(name, str) and name) \
            or not isinstance(feature, int) or isinstance(feature, bool):
        return None
    return Source(str((gpuclass.get("metadata") or {}).get("name")), namespace, name, feature)


def token_of(secret: Mapping | None) -> str | None:
    """The source Secret's `token` as base64 (as `data` holds it); None when
    the Secret or the key is missing."""
    if secret is None:
        return None
    data = secret.get("data") or {}
    if isinstance(data.get(TOKEN_KEY), str):
        return data[TOKEN_KEY]
    string = (secret.get("stringData") or {}).get(TOKEN_KEY)
    if isinstance(string, str):
        return base64.b64encode(string.encode()).decode()
    return None


def entitled(namespace: str, labels: Mapping[str, Mapping[str, str]]) -> bool:
    """Whether `namespace` is entitled, given every namespace's labels by
    name (a missing namespace is not entitled)."""
    chain = list(ancestors(namespace)) if is_tenant_namespace(namespace) else [namespace]
    return all((labels.get(name) or {}).get(VGPU_LABEL) == "true" for name in chain) if chain else False


def desired_copy(source: Source, token: str, namespace: str) -> dict:
    """The copy of `source` in `namespace`, as the contract spells it."""
    return {
        "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
        "metadata": {
            "name": copy_name(source.gpu_class), "namespace": namespace,
            "labels": {MANAGED_BY_LABEL: MANAGED_BY, CLASS_LABEL: source.gpu_class},
            "annotations": {SOURCE_ANNOTATION: f"{source.namespace}/{source.name}"},
        },
        "data": {
            COPY_TOKEN_KEY: token,
            GRIDD_KEY: base64.b64encode(gridd_conf(source.feature_type).encode()).decode(),
        },
    }


def matches(current: Mapping, wanted: Mapping) -> bool:
    """Whether a stored copy already says what the contract says (its own
    labels and annotations may carry more: only ours are compared)."""
    meta, want = current.get("metadata") or {}, wanted["metadata"]
    labels, annotations = meta.get("labels") or {}, meta.get("annotations") or {}
    return (current.get("type", "Opaque") == wanted["type"] and (current.get("data") or {}) == wanted["data"]
            and all(labels.get(k) == v for k, v in want["labels"].items())
            and all(annotations.get(k) == v for k, v in want["annotations"].items()))


@dataclass
class Plan:
    create: list[dict] = field(default_factory=list)
    update: list[dict] = field(default_factory=list)
    delete: list[tuple[str, str]] = field(default_factory=list)  # (namespace, name)
    problems: list[str] = field(default_factory=list)  # classes whose source cannot be copied

    def __bool__(self) -> bool:
        return bool(self.create or self.update or self.delete)


def plan(classes: Iterable[Mapping], sources: Mapping[tuple[str, str], Mapping | None],
         namespace_labels: Mapping[str, Mapping[str, str]], copies: Mapping[tuple[str, str], Mapping],
         foreign: Iterable[tuple[str, str]] = (), only: Iterable[str] | None = None) -> Plan:
    """The writes that bring the copies to the contract.

    `sources`: (namespace, name) -> the source Secret, None when it does not
    exist; `namespace_labels`: every namespace's labels; `copies`: the
    copier's Secrets by (namespace, name) (only Secrets `is_copy`);
    `foreign`: (namespace, name) of same-named Secrets the copier does not
    own (never written); `only`: limit the work to these namespaces.

    A class whose source Secret is gone has no copies (revoked). A class
    whose source is there but has no `token` keeps its copies as they are
    (a broken rotation does not strip running guests) and is a problem."""
    foreign = set(foreign)
    scope = None if only is None else set(only)
    wanted: dict[tuple[str, str], dict] = {}
    keep: set[tuple[str, str]] = set()
    result = Plan()
    entitled_here = [ns for ns in namespace_labels if (scope is None or ns in scope) and entitled(ns, namespace_labels)]
    for gpuclass in classes:
        source = license_of(gpuclass)
        if source is None:
            continue
        secret = sources.get((source.namespace, source.name))
        token = token_of(secret)
        if secret is not None and token is None:
            result.problems.append(f"GPUClass {source.gpu_class}: the license Secret {source.namespace}/"
                                   f"{source.name} has no {TOKEN_KEY!r} key; its copies are left as they are")
            for namespace in entitled_here:
                keep.add((namespace, copy_name(source.gpu_class)))
            continue
        if token is None:
            continue
        for namespace in entitled_here:
            wanted[(namespace, copy_name(source.gpu_class))] = desired_copy(source, token, namespace)
    for key, copy in sorted(wanted.items()):
        if key in foreign:
            continue
        current = copies.get(key)
        if current is None:
            result.create.append(copy)
        elif not matches(current, copy):
            result.update.append(copy)
    for key in sorted(copies):
        if scope is not None and key[0] not in scope:
            continue
        if key not in wanted and key not in keep:
            result.delete.append(key)
    return result
