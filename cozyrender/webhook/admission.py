"""AdmissionReview v1 in, AdmissionReview v1 out: the webhook's answer is the
answer `cozyrender check` gives for the same state and write.

Rule: a CREATE or UPDATE of an apps.cozystack.io Tenant, VMInstance,
KubernetesNodes or Kubernetes, of a kubevirt.io VirtualMachine or
VirtualMachineInstance, of a v1 Pod, or of a resource.k8s.io ResourceClaim
or ResourceClaimTemplate (the other doors to a GPU:
`cozyrender.budgets.doors`) is decided by `check_write(state, object)`;
every other request is allowed untouched. A refusal is `allowed: false` with
a Kubernetes Status: code 403, reason Forbidden, a message naming the object
and every reason, and one `details.causes` entry per reason (`field`,
`message`, `reason` FieldValueForbidden or FieldValueInvalid) beside
`details.kind/name/group`; the decision's warnings go to `response.warnings`.
An object the rules cannot read is refused as 422 Invalid naming the field;
anything that cannot be computed is refused saying why (fail closed). The
request's UID is echoed in every answer.

Pure functions, no I/O: `read_review` reads a request, `answer` builds the
response from a Decision, `refuse` builds a refusal, `admit` is the whole
pipeline over an indexed state (the server adds the cache and the ledger).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from cozyrender.budgets import Decision, check_write
from cozyrender.kube.shape import ShapeError

API_VERSION = "admission.k8s.io/v1"
APPS_GROUP = "apps.cozystack.io"
# The kinds the webhook decides, and their resources (plurals), as
# cozystack-api serves them (and the tests' stand-in CRDs).
CHECKED_KINDS = {
    "Tenant": "tenants",
    "VMInstance": "vminstances",
    "KubernetesNodes": "kubernetesnodeses",
    "Kubernetes": "kuberneteses",
}
# The other doors to a GPU, by API group (their resources as Kubernetes and KubeVirt serve them).
DOOR_RESOURCES = {
    ("kubevirt.io", "VirtualMachine"): "virtualmachines",
    ("kubevirt.io", "VirtualMachineInstance"): "virtualmachineinstances",
    ("", "Pod"): "pods",
    ("resource.k8s.io", "ResourceClaim"): "resourceclaims",
    ("resource.k8s.io", "ResourceClaimTemplate"): "resourceclaimtemplates",
}
CHECKED_OPERATIONS = ("CREATE", "UPDATE")
# Kubernetes' own reasons (metav1.StatusReason) and field error types.
FORBIDDEN, INVALID, INTERNAL = (403, "Forbidden"), (422, "Invalid"), (500, "InternalError")
# Warnings: the API server truncates longer ones; keep each one line.
MAX_WARNING = 1024
MAX_WARNINGS = 32


class ReviewError(ValueError):
    """A body that is no AdmissionReview v1 request; `uid` when one was found."""

    def __init__(self, message: str, uid: str = "") -> None:
        super().__init__(message)
        self.uid = uid


@dataclass(frozen=True)
class Review:
    """The parts of an AdmissionReview request the webhook reads."""

    uid: str
    group: str
    version: str
    kind: str
    operation: str
    namespace: str
    name: str
    obj: Mapping | None
    old: Mapping | None
    dry_run: bool

    @property
    def checked(self) -> bool:
        """Whether the budget rules decide this request."""
        if self.operation not in CHECKED_OPERATIONS:
            return False
        return (self.group == APPS_GROUP and self.kind in CHECKED_KINDS) or (self.group, self.kind) in DOOR_RESOURCES

    @property
    def plural(self) -> str:
        if self.group == APPS_GROUP:
            return CHECKED_KINDS.get(self.kind, self.kind.lower())
        return DOOR_RESOURCES.get((self.group, self.kind), self.kind.lower())

    @property
    def resource(self) -> str:
        return f"{self.plural}.{self.group}" if self.group else self.plural

    def display(self) -> str:
        where = f"{self.namespace}/" if self.namespace else ""
        return f"{self.kind} {where}{self.name or '<unnamed>'}"


def read_review(body: object) -> Review:
    """The request of an AdmissionReview v1 body (parsed JSON); ReviewError
    saying what is wrong (with the UID when the request had one)."""
    if not isinstance(body, Mapping):
        raise ReviewError("the body is not a JSON object")
    if body.get("apiVersion") != API_VERSION or body.get("kind") != "AdmissionReview":
        raise ReviewError(f"expected an AdmissionReview {API_VERSION}, got kind {body.get('kind')!r} "
                          f"apiVersion {body.get('apiVersion')!r}")
    request = body.get("request")
    if not isinstance(request, Mapping):
        raise ReviewError("the AdmissionReview has no request")
    uid = request.get("uid")
    if not isinstance(uid, str) or not uid:
        raise ReviewError("the request has no uid")
    kind = request.get("kind")
    if not isinstance(kind, Mapping) or not isinstance(kind.get("kind"), str):
        raise ReviewError("the request has no kind", uid)
    operation = request.get("operation")
    if not isinstance(operation, str):
        raise ReviewError("the request has no operation", uid)
    obj, old = request.get("object"), request.get("oldObject")
    for field, value in (("object", obj), ("oldObject", old)):
        if value is not None and not isinstance(value, Mapping):
            raise ReviewError(f"the request's {field} is not an object", uid)
    strings = {}
    for field in ("namespace", "name"):
        value = request.get(field) or ""
        if not isinstance(value, str):
            raise ReviewError(f"the request's {field} is not a string", uid)
        strings[field] = value
    group, version = kind.get("group") or "", kind.get("version") or ""
    if not isinstance(group, str) or not isinstance(version, str):
        raise ReviewError("the request's kind is malformed", uid)
    return Review(uid=uid, group=group, version=version, kind=kind["kind"], operation=operation,
                  namespace=strings["namespace"], name=strings["name"], obj=obj, old=old,
                  dry_run=request.get("dryRun") is True)


def written_object(review: Review) -> dict:
    """The object as the rules read it: the request's object with its kind,
    apiVersion, name and namespace as the request states them (the API server
    fills the name of a generateName create before validating admission).
    ShapeError when the request carries no object to check."""
    if review.obj is None:
        raise ShapeError(f"{review.display()}: the request carries no object to check")
    obj = dict(review.obj)
    obj["apiVersion"] = f"{review.group}/{review.version}" if review.group else review.version
    obj["kind"] = review.kind
    meta = obj.get("metadata")
    if isinstance(meta, Mapping):
        meta = dict(meta)
        if review.name and not meta.get("name"):
            meta["name"] = review.name
        if review.namespace and not meta.get("namespace"):
            meta["namespace"] = review.namespace
        obj["metadata"] = meta
    return obj


def envelope(response: dict) -> dict:
    """The AdmissionReview carrying `response`."""
    return {"apiVersion": API_VERSION, "kind": "AdmissionReview", "response": response}


def allow(uid: str, warnings: tuple[str, ...] | list[str] = ()) -> dict:
    response: dict = {"uid": uid, "allowed": True}
    shown = _warnings(warnings)
    if shown:
        response["warnings"] = shown
    return response


def refuse(uid: str, message: str, status: tuple[int, str] = FORBIDDEN, review: Review | None = None,
           causes: list[dict] | None = None, warnings: tuple[str, ...] | list[str] = ()) -> dict:
    """A refusal: `allowed: false` with a Status of `status` (code, reason)."""
    code, reason = status
    details: dict = {}
    if review is not None:
        details = {"kind": review.plural, "group": review.group}
        if review.name:
            details["name"] = review.name
    if causes:
        details["causes"] = causes
    result: dict = {"status": "Failure", "code": code, "reason": reason, "message": message}
    if details:
        result["details"] = details
    response: dict = {"uid": uid, "allowed": False, "status": result}
    shown = _warnings(warnings)
    if shown:
        response["warnings"] = shown
    return response


def _cause(field: str, message: str) -> dict:
    """A Kubernetes StatusCause for one reason: `Forbidden: ...` and
    `Invalid: ...` messages become FieldValueForbidden / FieldValueInvalid."""
    kind = "FieldValueForbidden"
    for prefix, name in (("Forbidden: ", "FieldValueForbidden"), ("Invalid: ", "FieldValueInvalid")):
        if message.startswith(prefix):
            kind, message = name, message[len(prefix):]
            break
    return {"reason": kind, "field": field, "message": message}


def answer(review: Review, decision: Decision) -> dict:
    """The response for `decision`: allowed with its warnings, or a 403
    refusal with one cause per reason."""
    if decision.allowed:
        return allow(review.uid, decision.warnings)
    reasons = "; ".join(f"{r.field}: {r.message}" for r in decision.reasons)
    message = f"{review.display()} is refused by the GPU budget rules: {reasons}"
    causes = [_cause(r.field, r.message) for r in decision.reasons]
    return refuse(review.uid, message, FORBIDDEN, review, causes, decision.warnings)


def unreadable(review: Review, err: ShapeError) -> dict:
    """A 422 refusal for an object the rules cannot read, naming the field."""
    causes = []
    if err.field is not None:
        path, problem = err.field
        causes.append({"reason": "FieldValueInvalid", "field": path or "<root>", "message": problem})
    return refuse(review.uid, f"{review.display()} cannot be checked against the GPU budget rules: {err}",
                  INVALID, review, causes)


def cannot_decide(review: Review | None, uid: str, why: str) -> dict:
    """Fail closed: a refusal saying why no answer could be computed."""
    who = review.display() if review is not None else "the request"
    return refuse(uid, f"{who} is refused: the GPU budget webhook cannot decide it: {why}", INTERNAL, review)


def unreadable_bearing(state, unreadable: Mapping[tuple, str], obj: Mapping) -> str | None:
    """Why write `obj` cannot be decided for the objects the rules cannot
    read (`unreadable`: (kind, namespace, name) -> why, as the cache keeps
    them), naming each one in the pools it is decided in and its owner; None
    when none is (`cozyrender.budgets.unreadable`: the others' writes are
    decided as usual)."""
    if not unreadable:
        return None
    from cozyrender.budgets.unreadable import UnreadableObject, refusal_reason

    found = [UnreadableObject(kind, namespace or None, name, why) for (kind, namespace, name), why in unreadable.items()]
    return refusal_reason(state, found, obj)


def _warnings(warnings) -> list[str]:
    out = []
    for warning in list(warnings)[:MAX_WARNINGS]:
        text = " ".join(str(warning).split())
        out.append(text if len(text) <= MAX_WARNING else text[:MAX_WARNING - 3] + "...")
    return out


def decide(state, review: Review, platform_vgpu: bool | None = None) -> dict:
    """The response for a checked `review` against an indexed `state`:
    `check_write`'s decision, a 422 for an unreadable object, a fail-closed
    refusal for anything else that goes wrong."""
    try:
        obj = written_object(review)
        return answer(review, check_write(state, obj, platform_vgpu=platform_vgpu))
    except ShapeError as err:
        return unreadable(review, err)
    except (RecursionError, ArithmeticError, ValueError, TypeError, KeyError, AttributeError) as err:
        return cannot_decide(review, review.uid, f"{type(err).__name__}: {err}")


def admit(state, body: object, platform_vgpu: bool | None = None) -> dict:
    """The whole pure pipeline: an AdmissionReview body in, the
    AdmissionReview to send back out."""
    try:
        review = read_review(body)
    except ReviewError as err:
        return envelope(cannot_decide(None, err.uid, str(err)))
    if not review.checked:
        return envelope(allow(review.uid))
    return envelope(decide(state, review, platform_vgpu))
