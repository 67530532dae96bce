"""The audit of a whole state: every declaration readable, every pool
within its budgets, and the GPU budgets a sub-tenant escapes.

For each budget pool root R and budget key K it declares: devices reserved
in R's pool for the classes K covers plus the charges of carving tenants
must stay within R's K (the design page's invariant), and the devices
physically reserved in R's subtree (its pool's, and its carving tenants'
subtrees' in the classes they cap) must too: a subtree holding more, with
some of it in sub-pools, is `over-held` (after a lowering; the
hierarchical rule then refuses any growth below R until it fits). For each ordinary
pool root and key: the pool's usage plus carving tenants' charges must stay
within the value. A sub-tenant that declares its own quotas is a pool root
of its own and leaves its parent's pool for every key it does not declare,
so when it does not declare a key covering what an ancestor's budget key
covers, its workloads are counted against no budget of that ancestor:
reported as a warning.

Pure functions, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from cozyrender.kube.quantity import format_quantity

from .index import BudgetState, covered
from .model import quota_field
from cozyrender.namespaces import ROOT_NAMESPACE
from .checks import carvers_note, escaped_keys
from .write import inverted_message, malformed_namespace_message, named_device_problem, near_miss_keys, raw_name_problem
from .usage import format_amount

ERROR = "error"
WARNING = "warning"


@dataclass(frozen=True)
class Finding:
    """One audit result. `numbers` holds the figures behind the message."""

    severity: str
    kind: str
    namespace: str
    field: str
    message: str
    numbers: tuple[tuple[str, str], ...] = ()
    # The object to fix (kind, namespace, name): the Tenant declaring the key,
    # the workload; None where the finding is about a namespace itself.
    object: tuple[str, str, str] | None = None

    def as_dict(self) -> dict:
        return {
            "severity": self.severity,
            "kind": self.kind,
            "namespace": self.namespace,
            **({"object": dict(zip(("kind", "namespace", "name"), self.object))} if self.object else {}),
            "field": self.field,
            "message": self.message,
            **({"numbers": dict(self.numbers)} if self.numbers else {}),
        }


def _tenant(declaration) -> tuple[str, str, str]:
    return ("Tenant", declaration.created_in, declaration.tenant)


def _sort_key(finding: Finding) -> tuple:
    return (finding.severity != ERROR, finding.namespace, finding.kind, finding.field, finding.message)


def audit(state: BudgetState) -> list[Finding]:
    """Every finding, errors first, then by namespace: deterministic for a given state."""
    findings: list[Finding] = []
    for namespace, declaration in state.declarations.items():
        for key, problem in declaration.problems:
            note = ""
            if declaration.unusable:
                note = "; counted as 0 until fixed (growth under it is refused)"
            findings.append(Finding(ERROR, "invalid-declaration", namespace, quota_field(key),
                                    f"{declaration.ref}: {problem}{note}", object=_tenant(declaration)))
        findings.extend(Finding(WARNING, "near-miss-key", namespace, quota_field(key),
                                f"{declaration.ref}: {message}", object=_tenant(declaration))
                        for key, message in near_miss_keys(declaration.declared_keys))
        if declaration.budgets:
            findings.extend(_audit_budget_pool(state, namespace))
        if declaration.ordinary:
            findings.extend(_audit_ordinary_pool(state, namespace))
        findings.extend(_escapes(state, namespace))
    findings.extend(_workload_findings(state))
    for namespace, found in state.malformed_namespaces.items():
        findings.append(Finding(
            ERROR, "malformed-namespace", namespace, "metadata.namespace",
            f"{malformed_namespace_message(namespace)} ({', '.join(found[:3])}"
            + (f" and {len(found) - 3} more" if len(found) > 3 else "") + ")",
        ))
    if state.platform_disagreement:
        findings.append(Finding(ERROR, "vgpu-disagreement", ROOT_NAMESPACE, "metadata.labels",
                                state.platform_disagreement))
    from .classes import label_disagreements

    for namespace in state.namespace_vgpu:  # each label against its own chain (ancestors report their own)
        for disagreement in label_disagreements(state, namespace, bool(state.platform_vgpu))[-1:]:
            if disagreement.startswith(f"namespace {namespace}:"):
                findings.append(Finding(ERROR, "vgpu-disagreement", namespace, "metadata.labels",
                                        f"the vGPU entitlement sources disagree: {disagreement}"))
    findings.sort(key=_sort_key)
    return findings


def _workload_findings(state: BudgetState) -> list[Finding]:
    """Workloads in the state a write check would refuse whatever their
    budget (an inverted replica range, a device-plugin name where classes or
    budgets apply: errors), and device-plugin names elsewhere (warnings:
    they reserve nothing and no GPU rule reads them)."""
    findings = []
    for (kind, namespace, name), workload in state.workloads.items():
        for prefix, low, high in workload.replicas_inverted:
            findings.append(Finding(ERROR, "invalid-workload", namespace, f"{kind} {name}: {prefix}.minReplicas",
                                    inverted_message(prefix, low, high), object=(kind, namespace, name)))
        for path, device in workload.raw_names:
            problem = raw_name_problem(state, workload, device)
            field = f"{kind} {name}: {path}.name"
            if problem is not None:
                findings.append(Finding(ERROR, "device-name", namespace, field, problem.removeprefix("Forbidden: "),
                                        object=(kind, namespace, name)))
            else:
                findings.append(Finding(
                    WARNING, "device-name", namespace, field,
                    f"a device-plugin name ({device!r}) reserves nothing: no GPU class, budget or vGPU rule reads it",
                    object=(kind, namespace, name),
                ))
        for entry in workload.entries:
            problem = named_device_problem(state, entry)
            if problem is not None:
                findings.append(Finding(ERROR, "device-name", namespace, f"{kind} {name}: {entry.path}.name",
                                        problem.removeprefix("Forbidden: "), object=(kind, namespace, name)))
    return findings


def _audit_budget_pool(state: BudgetState, root: str) -> list[Finding]:
    findings = []
    declaration = state.declarations[root]
    for key, budget in declaration.budgets.items():
        held = state.held_in_subtree(root, key)
        # Only where sub-pools hold some of it: a pool over on its own
        # reservations is `over-committed` already, naming them.
        if held > budget and covered(state.physical_below.get(root, {}), key):
            findings.append(Finding(
                ERROR, "over-held", root, quota_field(key.key),
                f"the subtree of {declaration.ref} holds more devices than its "
                f"GPU budget {key.key!r}: {held} reserved in {root} and the sub-pools it caps > budget {budget}; "
                "no growth below it is admitted until it fits",
                (("budget", str(budget)), ("heldInSubtree", str(held))), _tenant(declaration),
            ))
    for key, budget in declaration.budgets.items():
        reserved = state.reserved_for(root, key)
        carved = state.charged_to(root, key)
        if reserved + carved > budget:
            findings.append(Finding(
                ERROR, "over-committed", root, quota_field(key.key),
                f"pool {root} of {declaration.ref} is over its GPU budget {key.key!r}: reserved {reserved} + "
                f"carved out {carved} = {reserved + carved} > budget {budget}"
                f"{carvers_note(state, root, key) if carved else ''}",
                (("budget", str(budget)), ("reserved", str(reserved)), ("carvedOut", str(carved))), _tenant(declaration),
            ))
    return findings


def _audit_ordinary_pool(state: BudgetState, root: str) -> list[Finding]:
    findings = []
    usage = state.pool_usage.get(root, {})
    charges = state.ordinary_charges.get(root, {})
    declaration = state.declarations[root]
    for key, value in declaration.ordinary.items():  # keyed by the quota key they render to
        used = usage.get(key, Fraction(0))
        carved = charges.get(key, Fraction(0))
        if used + carved > value:
            declared = declaration.declared_as[key]
            findings.append(Finding(
                ERROR, "over-committed", root, quota_field(declared),
                f"pool {root} of {declaration.ref} is over {declared!r}: used {format_amount(key, used)} ({key}) + "
                f"carved out {format_amount(key, carved)} = {format_amount(key, used + carved)} > "
                f"{format_amount(key, value)}{carvers_note(state, root, key, ordinary=True) if carved else ''}",
                (("budget", format_quantity(value)), ("used", format_quantity(used)),
                 ("carvedOut", format_quantity(carved))), _tenant(declaration),
            ))
    return findings


def _escapes(state: BudgetState, namespace: str) -> list[Finding]:
    """Budget keys of the nearest pool root above `namespace` that its tenant
    (a pool root itself) does not cap: its pool's devices of those classes
    count against no budget of that root (`checks.escaped_keys`)."""
    declaration = state.declarations[namespace]
    return [
        Finding(WARNING, "escapes-budget", namespace, quota_field(key.key), message, object=_tenant(declaration))
        for key, message in escaped_keys(state, declaration)
    ]


def with_spec_findings(findings: list[Finding], objects) -> list[Finding]:
    """`findings` and, for each apps object of the state, each field its app's
    schema refuses (`cozyrender.appspec`: an unknown field such as `spec.gpu`,
    which reserves nothing; a wrong type) as an error, in the audit's order: a
    state kept in Git is audited as its writes would be checked."""
    from cozyrender.appspec import spec_problems

    from .model import APPS_GROUP, api_group

    extra = []
    for obj in objects:
        if not isinstance(obj, dict) or api_group(obj) != APPS_GROUP:
            continue
        meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
        for field, message in spec_problems(obj):
            extra.append(Finding(ERROR, "schema", str(meta.get("namespace") or ""), field,
                                 f"{obj.get('kind')} {meta.get('namespace')}/{meta.get('name')}: {message}",
                                 object=(str(obj.get("kind")), str(meta.get("namespace") or ""),
                                         str(meta.get("name") or ""))))
    return sorted([*findings, *extra], key=_sort_key) if extra else findings
