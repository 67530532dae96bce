"""The mutating admission answers, as pure functions: tenant HelmReleases
(Flux injection, `mutate`) and VirtualMachineInstances (the license volume,
`licenses`).

Rule: a CREATE or UPDATE of a Cozystack tenant HelmRelease
(`flux.inject.is_tenant_release`) is admitted with a JSON Patch that sets
cozyrender's postRenderers first in `spec.postRenderers` (the user's kept
after), computed by `flux.inject` from the release and its parent's state.
Any other object, and any other operation, is admitted unchanged. When the
postRenderers cannot be computed the write is refused with the reason (fail
closed): a tenant release never runs without the rules. A dry run is answered
the same way (nothing is written here). `parent_state` is a lookup into the
caller's cache (namespace -> ParentState); nothing here does I/O.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Mapping
from pathlib import Path

from cozyrender.flux.inject import InjectError, ParentState, injected, is_tenant_release, json_patch

MUTATED_OPERATIONS = ("CREATE", "UPDATE")


def _response(uid: object, allowed: bool, message: str | None = None,
              patch: list[dict] | None = None) -> dict:
    response: dict = {"uid": uid, "allowed": allowed}
    if message is not None:
        response["status"] = {"code": 403 if not allowed else 200, "message": message,
                              **({"reason": "Forbidden"} if not allowed else {})}
    if patch:
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(json.dumps(patch).encode()).decode()
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}


def mutate(review: Mapping, parent_state: Callable[[str], ParentState], chart: str | Path) -> dict:
    """AdmissionReview request -> AdmissionReview response."""
    request = review.get("request") if isinstance(review.get("request"), Mapping) else None
    if request is None:
        return _response(None, False, "cozyrender: the AdmissionReview has no request")
    uid = request.get("uid")
    obj = request.get("object")
    if request.get("operation") not in MUTATED_OPERATIONS or not isinstance(obj, Mapping) \
            or not is_tenant_release(obj):
        return _response(uid, True)
    metadata = obj.get("metadata") if isinstance(obj.get("metadata"), Mapping) else {}
    namespace = metadata.get("namespace") or request.get("namespace")
    try:
        if not isinstance(namespace, str) or not namespace:
            raise InjectError("the HelmRelease has no namespace")
        if not metadata.get("namespace"):
            obj = {**obj, "metadata": {**metadata, "namespace": namespace}}
        post_renderers = injected(obj, parent_state(namespace), chart)
    except InjectError as err:
        return _response(uid, False, f"cozyrender: {err}")
    return _response(uid, True, patch=json_patch(obj, post_renderers))


def licenses(review: Mapping, patch_for: Callable[[Mapping], list[dict]]) -> dict:
    """AdmissionReview request -> response for the license webhook: a CREATE of a
    VirtualMachineInstance is admitted with `patch_for(vmi)` (the license volumes it lacks,
    `cozyrender.budgets.license_volumes`); anything else is admitted unchanged. A patch that
    cannot be computed refuses the write, saying why (fail closed: a licensed guest never
    starts without its license)."""
    request = review.get("request") if isinstance(review.get("request"), Mapping) else None
    if request is None:
        return _response(None, False, "cozyrender: the AdmissionReview has no request")
    uid, obj = request.get("uid"), request.get("object")
    if request.get("operation") != "CREATE" or not isinstance(obj, Mapping) \
            or obj.get("kind") != "VirtualMachineInstance":
        return _response(uid, True)
    try:
        patch = patch_for(obj)
    except Exception as err:  # noqa: BLE001 - fail closed, saying why
        return _response(uid, False, f"cozyrender: cannot compute the license volumes: {type(err).__name__}: {err}")
    return _response(uid, True, patch=patch)
