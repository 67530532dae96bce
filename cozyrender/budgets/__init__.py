"""GPU budgets: the tenant tree, pools, reservations, the write checks and
the audit, as pure functions an admission webhook or a CI job can call.

    state = index_state(objects)            # once per state
    decision = check_write(state, obj)      # any number of writes
    findings = audit(state)                 # the whole state

See docs of each module (namespace naming is `cozyrender.namespaces`): `model` (declarations
and reservations), `usage` (ordinary usage), `index` (pools and
aggregates), `checks` (the write check and the declaration gate), `classes`
(the GPU class and vGPU gate), `audit`.
"""

from cozyrender.kube.shape import ShapeError

from .audit import ERROR, WARNING, Finding, audit
from .checks import Decision, Reason, check_tenant_declaration, check_workload_budget, growth
from .index import BudgetState, budget_charge, index_state
from .model import Declaration, Workload, parse_declaration, parse_workload
from .write import check_write

# An object the rules cannot read (a negative count, a gpus entry with
# neither class nor name, a missing namespace, a field of the wrong type...);
# str() names the object and the field. A command reports it as bad input,
# not as a refusal. The public name for the one error type every reader
# raises (`cozyrender.kube.shape.ShapeError`, used inside the package), so
# catching it catches a malformed pod or quota found while indexing too.
BudgetInputError = ShapeError

__all__ = [
    "ERROR", "WARNING", "BudgetInputError", "BudgetState", "Decision", "Declaration", "Finding", "Reason",
    "Workload", "audit", "budget_charge", "check_tenant_declaration", "check_workload_budget", "check_write",
    "growth", "index_state", "parse_declaration", "parse_workload",
]
