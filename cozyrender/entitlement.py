"""The vGPU entitlement chain: a tenant is entitled only when it asks for it
(`gpu.vgpu`, set by its parent's administrator) and its parent is entitled.
The chain starts at the platform's `gpu.vgpu` (`_cluster.gpu-vgpu`).

Pure functions; the post-renderer, the Flux patches and the budget check all
decide entitlement here.
"""

from __future__ import annotations

from collections.abc import Iterable

# The label the post-renderer writes on every tenant namespace, and the
# render inputs the charts put on the Namespace for it.
VGPU_LABEL = "namespace.cozystack.io/vgpu"
REQUESTED_ANNOTATION = "render.cozystack.io/vgpu-requested"
PARENT_ANNOTATION = "render.cozystack.io/vgpu-parent"


def is_entitled(requested: bool, parent_entitled: bool) -> bool:
    """A tenant's effective entitlement."""
    return requested and parent_entitled


def chain_entitlement(platform_vgpu: bool, requested_along_chain: Iterable[bool]) -> bool:
    """Entitlement at the end of a chain root → ... → tenant, given each
    tenant's own request in order (the root's included)."""
    entitled = platform_vgpu
    for requested in requested_along_chain:
        entitled = is_entitled(requested, entitled)
    return entitled


def flag_value(value: object) -> bool | None:
    """A boolean flag as values carry it: True/False or "true"/"false".
    None for anything else (the caller decides whether that is an error)."""
    if value is True or value == "true":
        return True
    if value is False or value == "false":
        return False
    return None


def label_value(entitled: bool) -> str:
    return "true" if entitled else "false"


def agreed_entitlement(sources: dict[str, bool | None]) -> tuple[bool | None, str | None]:
    """The platform's vGPU entitlement from several sources (a name per
    source; None where the source is absent): None when no source is
    present; True only when every present source says true. When present
    sources disagree the answer is False, with a message naming each
    source and what it says: every choice errs towards refusing, and no
    source outranks another (issue 11 item 6)."""
    present = {name: value for name, value in sources.items() if value is not None}
    if not present:
        return None, None
    if len(set(present.values())) == 1:
        return next(iter(present.values())), None
    said = ", ".join(f"{name} says {label_value(value)}" for name, value in sorted(present.items()))
    return False, f"the platform's vGPU sources disagree ({said}): treated as off until they agree"


def broken_link(values: dict, namespace: str) -> str | None:
    """Why a tenant rendered with `values` into release namespace `namespace`
    (its parent's) is not entitled although it asks for vGPU (`gpu.vgpu`
    true): the link of the chain that breaks it, in words; None when it does
    not ask, or when the chain holds."""
    gpu = values.get("gpu") if isinstance(values.get("gpu"), dict) else {}
    if flag_value(gpu.get("vgpu")) is not True:
        return None
    parent_values = values.get("_namespace") if isinstance(values.get("_namespace"), dict) else {}
    cluster = values.get("_cluster") if isinstance(values.get("_cluster"), dict) else {}
    parent = flag_value(parent_values.get("vgpu"))
    if parent is True:
        return None
    how = (f"give the parent's values with --parent-values FILE (FILE: `kubectl get secret cozystack-values "
           f"-n {namespace} -o yaml`, or a state export holding it)")
    if parent is None:
        return (f"gpu.vgpu is true, but the parent's entitlement (_namespace.vgpu, from {namespace}'s cozystack-values "
                f"Secret) is not in the values: rendered not entitled; {how}")
    if flag_value(cluster.get("gpu-vgpu")) is False:
        return (f"gpu.vgpu is true, but the platform's gpu.vgpu is off (_cluster.gpu-vgpu: false): no tenant is "
                f"entitled until the platform turns it on")
    return (f"gpu.vgpu is true, but the parent {namespace} is not entitled (_namespace.vgpu: false): a tenant is "
            f"entitled only when its parent is; entitle {namespace} first (its own gpu.vgpu, up the chain)")
