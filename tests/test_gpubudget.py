"""GPUBudget, the pure part (issue 35 item 1): a tenant namespace's status is
the tree's rows of it (`cozyrender tree -o json`, the same figures), Ready
says when they cannot be computed naming the object, an unchanged state
yields an identical status (so nothing is written), a changed figure a
different one; the CRD's schema takes every status the function makes (as
the API server prunes and validates it) and its printer columns read the
fields the status has; the chart's RBAC for it is exactly what the writer
uses."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml
from test_budgets_builders import classes, tenant, vm
from test_check_unreadable import NAMED, widget
from test_webhook_admission import A100

from cozyrender.budgets import audit, index_state
from cozyrender.tree import build_tree, gpubudget
from cozyrender.tree.jsonout import tree_data
from cozyrender.tree.objects import computed_tree

ROOT = Path(__file__).resolve().parent.parent
CRD = ROOT / "charts" / "cozyrender-webhook" / "crds" / "gpubudgets.cozystack.io.yaml"
ALL = "gpuclass.cozystack.io/devices"
NOW, LATER = "2026-12-07T10:00:00Z", "2026-12-07T11:00:00Z"

STATE = classes("a100") + [
    tenant("acme", quotas={ALL: 8, "cpu": "32", "memory": "128Gi"}),
    tenant("ml", namespace="tenant-acme", quotas={ALL: 4, A100: 4}),
    tenant("other", quotas={A100: 2}),
    vm("tenant-acme", "infer", [{"class": "a100", "count": 1}]),
    vm("tenant-acme-ml", "train", [{"class": "a100", "count": 2}]),
]


def statuses(state, now=NOW, stored=None) -> dict[str, dict]:
    computed = computed_tree(state)
    return gpubudget.desired(computed.tree, computed.problem, now, lambda ns: (stored or {}).get(ns))


def as_stored(wanted: dict[str, dict]) -> dict[str, dict]:
    return {ns: {"metadata": {"name": gpubudget.NAME, "namespace": ns, "generation": 1}, "status": status}
            for ns, status in wanted.items()}


def test_the_keys_are_the_trees_json_rows_with_the_same_figures():
    state = index_state(STATE)
    tree_json = {node["namespace"]: node for node in tree_data(build_tree(state, audit(state)))["tenants"]}
    wanted = statuses(STATE)
    assert set(wanted) == set(tree_json)
    for namespace, status in wanted.items():
        rows = [{field: row[field] for field in gpubudget.KEY_FIELDS} for row in tree_json[namespace]["keys"]]
        assert status["keys"] == rows, namespace
        assert status["summary"]["used"] == ",".join(str(row["used"]) for row in rows)
        assert status["tenant"] == tree_json[namespace]["tenant"]
        assert status["budgetPool"] == tree_json[namespace]["budgetPool"]
        [ready] = status["conditions"]
        assert (ready["type"], ready["status"], ready["reason"]) == ("Ready", "True", "Computed")
    acme = {row["key"]: row for row in wanted["tenant-acme"]["keys"]}
    # 8 devices; ml carves 4 out; the pool reserves 1 (ml's pool is its own); cpu as a quantity string
    assert {k: acme[ALL][k] for k in ("budget", "carvedOut", "used", "left")} == {
        "budget": 8, "carvedOut": 4, "used": 1, "left": 3}
    assert acme["cpu"]["budget"] == "32" and acme["cpu"]["type"] == "ordinary"
    assert {row["key"]: row["used"] for row in wanted["tenant-acme-ml"]["keys"]} == {ALL: 2, A100: 2}


def test_an_unchanged_state_yields_an_identical_status_and_nothing_to_write():
    first = as_stored(statuses(STATE, NOW))
    again = statuses(STATE, LATER, first)
    assert all(not gpubudget.changed(first[ns], status) for ns, status in again.items())
    assert again["tenant-acme"]["conditions"][0]["lastTransitionTime"] == NOW
    assert again["tenant-acme"]["conditions"][0]["observedGeneration"] == 1


def test_a_new_workload_changes_only_the_pools_it_counts_in():
    first = as_stored(statuses(STATE, NOW))
    grown = statuses(STATE + [vm("tenant-acme", "more", [{"class": "a100", "count": 2}])], LATER, first)
    moved = {ns for ns, status in grown.items() if gpubudget.changed(first[ns], status)}
    assert moved == {"tenant-acme"}
    acme = {row["key"]: row for row in grown["tenant-acme"]["keys"]}[ALL]
    assert (acme["used"], acme["left"]) == (3, 1)
    assert gpubudget.changed(None, grown["tenant-other"])  # a missing GPUBudget is always written


def test_an_unreadable_object_blanks_only_the_figures_it_bears_on_and_names_it():
    state = classes("a100") + [tenant("foo", quotas={"cpu": "4"}), tenant("bar", quotas={A100: 4}),
                               widget("tenant-foo")]
    wanted = statuses(state, NOW, as_stored(statuses(state[:-1], NOW)))
    foo = wanted["tenant-foo"]
    [ready] = foo["conditions"]
    assert foo["keys"] == [] and (ready["status"], ready["reason"]) == ("False", "Unreadable")
    assert NAMED in ready["message"]
    assert ready["lastTransitionTime"] == NOW  # a new status: a transition at `now`
    [bar_ready] = wanted["tenant-bar"]["conditions"]
    assert bar_ready["status"] == "True" and wanted["tenant-bar"]["keys"]


def test_no_tree_at_all_says_why_and_keeps_who_it_is():
    stored = as_stored(statuses(STATE))["tenant-acme"]
    status = gpubudget.error_status("two Tenants own tenant-x", LATER, stored)
    [ready] = status["conditions"]
    assert status["keys"] == [] and status["tenant"] == "acme"
    assert (ready["status"], ready["reason"]) == ("False", "TreeError")
    assert ready["message"] == "no pool tree can be computed: two Tenants own tenant-x"
    assert gpubudget.changed(stored, status)


# ---------------------------------------------------------------- the CRD

@pytest.fixture(scope="module")
def crd() -> dict:
    return yaml.safe_load(CRD.read_text())


def test_every_status_the_function_makes_fits_the_crds_schema_unpruned(crd):
    from cozyrender.gpuclass.structural import SchemaValidator, prune

    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    validator = SchemaValidator(schema)
    unreadable = classes("a100") + [tenant("foo", quotas={"cpu": "4"}), widget("tenant-foo")]
    made = [*statuses(STATE).values(), *statuses(unreadable).values(), gpubudget.error_status("x", NOW)]
    for status in made:
        obj = {**gpubudget.new_object("tenant-acme"), "status": status}
        kept, dropped = prune(obj, schema)
        assert dropped == [] and kept == obj  # nothing the API server would drop
        assert validator.errors(kept) == [], status
        for row in status["keys"]:  # x-kubernetes-int-or-string: devices as integers, quantities as strings
            assert all(isinstance(row[f], int if row["type"] == "gpu" else str)
                       for f in ("budget", "carvedOut", "used", "left")), row


def test_the_printer_columns_show_every_key_comma_joined_in_order(crd):
    columns = {c["name"]: c["jsonPath"] for c in crd["spec"]["versions"][0]["additionalPrinterColumns"]}
    acme = statuses(STATE)["tenant-acme"]
    shown = {name: acme["summary"][columns[name].removeprefix(".status.summary.")]
             for name in ("Key", "Budget", "Carved Out", "Used", "Left")}
    assert shown == {"Key": f"{ALL},cpu,memory", "Budget": "8,32,128Gi", "Carved Out": "4,0,0", "Used": "1,0,0",
                     "Left": "3,32,128Gi"}
    assert columns["Tenant"] == ".status.tenant" and columns["Pool"] == ".status.budgetPool"
    assert statuses(STATE)["tenant-root"]["summary"] == {field: "" for field in gpubudget.SUMMARY_FIELDS}


def test_the_controller_may_write_gpubudgets_only_as_the_writer_does(helm4):
    def rules(controllers: str) -> list[dict]:
        rendered = subprocess.run([str(helm4), "template", "r", str(ROOT / "charts" / "cozyrender-webhook"),
                                   "--set", "controller.controllers=" + controllers.replace(",", "\\,")],
                                  capture_output=True, text=True, check=True).stdout
        [role] = [d for d in yaml.safe_load_all(rendered) if d and d["kind"] == "ClusterRole"
                  and d["metadata"]["name"] == "r-controller"]
        return role["rules"]

    def grants(rules: list[dict]) -> dict[str, set]:
        return {resource: set(rule["verbs"]) for rule in rules for resource in rule["resources"]
                if "gpubudgets" in resource}

    assert grants(rules("gpubudgets")) == {"gpubudgets": {"list", "watch", "create"},
                                           "gpubudgets/status": {"update"}}
    assert grants(rules("status,licenses,metrics")) == {}
    tree_reads = {r for rule in rules("metrics") for r in rule["resources"]}
    assert tree_reads <= {r for rule in rules("gpubudgets") for r in rule["resources"]} | {"gpuclasses"}
