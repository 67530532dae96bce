"""GPU budgets: the tenant tree, pools, reservations, the write checks and
the audit, as pure functions an admission webhook or a CI job can call.

    state = index_state(objects)            # once per state
    decision = check_write(state, obj)      # any number of writes
    findings = audit(state)                 # the whole state

See docs of each module: `tree` (namespace naming), `model` (declarations
and reservations), `usage` (ordinary usage), `index` (pools and
aggregates), `checks` (the write check and the declaration gate), `classes`
(the GPU class and vGPU gate), `audit`.
"""

from .audit import ERROR, WARNING, Finding, audit
from .checks import Decision, Reason, check_tenant_declaration, check_workload_budget, growth
from .index import BudgetState, budget_charge, index_state
from .model import BudgetInputError, Declaration, Workload, parse_declaration, parse_workload
from .write import check_write

__all__ = [
    "ERROR", "WARNING", "BudgetInputError", "BudgetState", "Decision", "Declaration", "Finding", "Reason",
    "Workload", "audit", "budget_charge", "check_tenant_declaration", "check_workload_budget", "check_write",
    "growth", "index_state", "parse_declaration", "parse_workload",
]
