"""Metrics isolation (issue 34 item 7): an object the rules cannot read
removes only the series of the pools it bears on
(`controllers.metrics.tree_samples`, the rule `budgets.unreadable` states
for the webhook's decisions). The hostile tenant's pod requesting
`example.com/widget: "10E"` in tenant-foo blanks tenant-foo's budget series
(`cozyrender_tenant_budget_unknown 1` instead) and leaves tenant-bar's and
tenant-acme's exactly as on the state without it; a GPUClass it cannot read
bears on every tenant; `cozyrender_tenant_tree_error` says 1 while anything
is left out, 0 otherwise."""

from __future__ import annotations

import pytest
from test_budgets_builders import classes, tenant
from test_check_unreadable import widget
from test_webhook_admission import A100

from cozyrender.controllers.metrics import render, tree_samples
from cozyrender.kube.shape import ShapeError

STATE = classes("a100") + [tenant("foo", quotas={"cpu": "4"}), tenant("bar", quotas={A100: 4}),
                           tenant("acme", quotas={"cpu": "8", "memory": "16Gi"})]


def series(samples, name: str) -> dict[tuple, float]:
    return {tuple(sorted(labels.items())): value for metric, labels, value in samples if metric == name}


def budgets_of(samples, namespace: str) -> dict[tuple, float]:
    return {labels: value for labels, value in series(samples, "cozyrender_tenant_budget").items()
            if ("namespace", namespace) in labels}


def test_without_unreadable_objects_every_tenant_has_its_series_and_no_error():
    samples = tree_samples(STATE)
    for namespace in ("tenant-foo", "tenant-bar", "tenant-acme"):
        assert budgets_of(samples, namespace), namespace
    assert series(samples, "cozyrender_tenant_budget_unknown") == {}
    assert series(samples, "cozyrender_tenant_tree_error") == {(): 0.0}


def test_an_unreadable_pod_removes_only_its_own_pools_series():
    clean = tree_samples(STATE)
    hostile = tree_samples(STATE + [widget("tenant-foo")])
    assert budgets_of(hostile, "tenant-foo") == {}
    assert series(hostile, "cozyrender_tenant_budget_unknown") == {
        (("namespace", "tenant-foo"), ("tenant", "foo")): 1.0}
    for namespace in ("tenant-bar", "tenant-acme"):
        assert budgets_of(hostile, namespace) == budgets_of(clean, namespace) != {}, namespace
    over = series(hostile, "cozyrender_tenant_budget_over_committed")
    assert over and not [labels for labels in over if ("namespace", "tenant-foo") in labels]
    assert series(hostile, "cozyrender_tenant_tree_error") == {(): 1.0}
    render(hostile)  # every series has its HELP


def test_an_unreadable_gpuclass_bears_on_every_tenant():
    broken = [dict(obj, spec={**obj["spec"], "resourceName": 7}) if obj["kind"] == "GPUClass" else obj
              for obj in STATE]
    samples = tree_samples(broken)
    assert series(samples, "cozyrender_tenant_budget") == {}
    unknown = {dict(labels)["namespace"] for labels in series(samples, "cozyrender_tenant_budget_unknown")}
    assert {"tenant-foo", "tenant-bar", "tenant-acme"} <= unknown
    assert series(samples, "cozyrender_tenant_tree_error") == {(): 1.0}


def test_a_state_no_removal_makes_readable_is_raised():
    foo = next(obj for obj in STATE if obj["kind"] == "Tenant" and obj["metadata"]["name"] == "foo")
    twin = dict(foo, spec={"resourceQuotas": {"cpu": "5"}})  # two different copies of one object
    with pytest.raises(ShapeError):
        tree_samples(STATE + [twin])
