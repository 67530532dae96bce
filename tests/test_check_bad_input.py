"""`cozyrender check` on structurally wrong objects: one line naming the file,
the object and the field, exit 2 (bad input, never 1, which means refused),
never a traceback and never a silent guess. One case per reviewer reproducer."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from test_budgets_builders import (
    as_listed,
    gpuclass,
    klist,
    pod,
    quota,
    run_check,
    tenant,
    vm,
    write_json,
)

from cozyrender.commands.check import command
from tests.conftest import replaced

CPU_AND_A100 = {"cpu": 4, "a100.gpuclass.cozystack.io/devices": 2}


_with = replaced


def _bad_input(result, *expected: str) -> None:
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output
    assert result.output.startswith("cozyrender check: error: ") and result.output.count("\n") == 1, result.output
    for text in expected:
        assert text in result.output, (text, result.output)


A_QUOTA = quota("tenant-a", "q", {"limits.cpu": "1"})
A_POD = pod("tenant-a", "p", {"cpu": "1"})
A_CLASS = gpuclass("a100", "nvidia.com/a100")

STATE_CASES = {
    "quota status 5": (_with(A_QUOTA, ("status",), 5), "ResourceQuota tenant-a/q: status is not an object"),
    "quota used 5": (_with(A_QUOTA, ("status",), {"used": 5}), "ResourceQuota tenant-a/q: status.used is not an object"),
    "quota used [1]": (_with(A_QUOTA, ("status",), {"used": [1]}), "ResourceQuota tenant-a/q: status.used is not an object"),
    # Skipping the value would drop the key and count the pods instead.
    "quota used lots": (_with(A_QUOTA, ("status", "used"), {"limits.cpu": "lots"}),
                        "ResourceQuota tenant-a/q: status.used.limits.cpu is not a Kubernetes quantity (got 'lots')"),
    "pod metadata 5": (_with(A_POD, ("metadata",), 5), "Pod: metadata is not an object (got 5)"),
    "quota metadata 5": (_with(A_QUOTA, ("metadata",), 5), "ResourceQuota: metadata is not an object"),
    "vm metadata 5": (_with(vm("tenant-a", "v"), ("metadata",), 5), "VMInstance: metadata is not an object"),
    "class metadata 5": (_with(A_CLASS, ("metadata",), 5), "GPUClass: metadata is not an object"),
    "class spec 5": (_with(A_CLASS, ("spec",), 5), "GPUClass a100: spec is not an object (got 5)"),
    "class resourceName [1]": (_with(A_CLASS, ("spec", "resourceName"), [1]),
                               "GPUClass a100: spec.resourceName is not a string (got [1])"),
    "class timestamp": (_with(A_CLASS, ("metadata", "creationTimestamp"), "yesterday"),
                        "GPUClass a100: metadata.creationTimestamp is not an RFC 3339 timestamp"),
    "pod containers 5": (_with(A_POD, ("spec", "containers"), 5), "Pod tenant-a/p: spec.containers is not a list (got 5)"),
    "pod container 5": (_with(A_POD, ("spec", "containers"), [5]), "Pod tenant-a/p: spec.containers[0] is not an object"),
    "pod limits list": (_with(A_POD, ("spec", "containers", 0, "resources", "limits"), [1]),
                        "Pod tenant-a/p: spec.containers[0].resources.limits is not an object"),
    "pod status 5": (_with(A_POD, ("status",), 5), "Pod tenant-a/p: status is not an object (got 5)"),
    "pod quantity": (pod("tenant-a", "p", {"cpu": "lots"}),
                     "Pod tenant-a/p: spec.containers[0].resources.limits.cpu is not a Kubernetes quantity (got 'lots')"),
    "pod unhashable quantity": (pod("tenant-a", "p", {"cpu": [1]}),
                                "Pod tenant-a/p: spec.containers[0].resources.limits.cpu is not a Kubernetes quantity"),
    "tenant spec.gpu 5": (_with(tenant("b"), ("spec", "gpu"), 5), "Tenant tenant-root/b: spec.gpu is not an object"),
    "vm gpus 0": (vm("tenant-a", "v", 0), "VMInstance tenant-a/v: spec.gpus is not a list"),
    "root namespace labels": ({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "tenant-root", "labels": 5}},
                              "Namespace tenant-root: metadata.labels is not an object"),
}


# An object with no usable name cannot be placed in any pool: bad input for a write too.
NAMELESS = {"pod metadata 5", "quota metadata 5", "vm metadata 5", "class metadata 5"}
# Tenant tenant-root/b holds tenant-b, outside the pools of tenant-a where the write goes.
ELSEWHERE = {"tenant spec.gpu 5"}


def _named(expected: str) -> str:
    """`Kind tenant-a/x: problem` as check names it: with the Tenant owning its namespace
    (tenant-root's is named `Tenant tenant-root/root`, as the webhook names it)."""
    ref, _, problem = expected.partition(": ")
    if " tenant-a/" in ref:
        return f"{ref} (in the namespace of Tenant tenant-root/a): {problem}"
    if " tenant-root/" in ref or ref == "Namespace tenant-root":
        return f"{ref} (in the namespace of Tenant tenant-root/root): {problem}"
    return expected


@pytest.mark.parametrize("bad,expected", STATE_CASES.values(), ids=list(STATE_CASES))
def test_a_malformed_state_object_is_bad_input_for_the_audit(tmp_path, bad, expected):
    """No audit of a state the rules cannot read: exit 2, naming the file, the object and the
    Tenant owning its namespace, as the webhook names it."""
    _bad_input(run_check(tmp_path, [tenant("a", quotas=CPU_AND_A100), bad]), "state.json: ", _named(expected))


@pytest.mark.parametrize("case", list(STATE_CASES))
def test_a_write_is_decided_around_a_malformed_state_object_as_the_webhook_decides_it(tmp_path, case):
    """Issue 28 item 2: the object is left out; a write in its pools is refused (exit 1) naming
    it and its owner, any other write is decided as on the state without it, with a warning
    naming it. An object with no usable name is still bad input."""
    bad, expected = STATE_CASES[case]
    write = vm("tenant-a", "w", [{"class": "a100"}])
    result = run_check(tmp_path, [tenant("a", quotas=CPU_AND_A100), bad], write, "-o", "text")
    if case in NAMELESS:
        _bad_input(result, "state.json: ", expected)
        return
    assert "Traceback" not in result.output and _named(expected) in result.output, result.output
    if case in ELSEWHERE:
        without = run_check(tmp_path, [tenant("a", quotas=CPU_AND_A100)], write, "-o", "text")
        assert result.exit_code == without.exit_code, (result.output, without.output)
        assert result.stdout.startswith(without.stdout.strip()), (result.output, without.output)
        assert "warning: 1 object(s) the rules cannot read are left out of the state" in result.stdout
    else:
        assert result.exit_code == 1 and result.stdout.startswith("refused\n"), result.output
        assert "metadata.namespace: 1 object(s) the rules cannot read are in the pools this write is decided " \
               "in, so it cannot be shown to fit" in result.stdout, result.output


def test_a_gpuclass_write_with_metadata_not_an_object_is_bad_input(tmp_path):
    result = run_check(tmp_path, [tenant("a"), A_CLASS], _with(A_CLASS, ("metadata",), 5))
    _bad_input(result, "write.json: GPUClass: metadata is not an object (got 5)")


def test_a_gpuclass_write_with_a_wrong_spec_is_refused_by_the_crd(tmp_path):
    # Decodable but invalid: the API server refuses it (exit 1), as the CRD says.
    result = run_check(tmp_path, [tenant("a"), A_CLASS], _with(A_CLASS, ("spec",), 5), "-o", "text")
    assert result.exit_code == 1 and "spec: Invalid" in result.output, result.output


def test_several_writes_are_a_usage_error(tmp_path):
    state = write_json(tmp_path / "state.json", klist(as_listed([tenant("a", quotas=CPU_AND_A100)])))
    first = write_json(tmp_path / "a.json", vm("tenant-a", "v", [{"class": "a100", "count": 9}]))
    second = write_json(tmp_path / "b.json", vm("tenant-a", "w", [{"class": "a100"}]))
    result = CliRunner().invoke(command, ["--state", str(state), "--write", str(first), "--write", str(second)])
    assert result.exit_code == 2 and "--write is given 2 times" in result.output, result.output
    assert "admitted" not in result.output and "refused" not in result.output


def test_a_list_whose_items_are_not_a_list_is_bad_input(tmp_path):
    (tmp_path / "state.yaml").write_text("apiVersion: v1\nkind: List\nitems: 5\n")
    result = CliRunner().invoke(command, ["--state", str(tmp_path / "state.yaml")])
    _bad_input(result, "state.yaml: document 1: List's items is not a list (got 5)")


def test_invalid_yaml_is_one_line_with_line_and_column(tmp_path):
    (tmp_path / "state.yaml").write_text("a: 1\nb: [1\nc: 2\n")
    result = CliRunner().invoke(command, ["--state", str(tmp_path / "state.yaml")])
    _bad_input(result, "state.yaml: not valid YAML: line 3, column 2: ")


@pytest.mark.parametrize("content,expected", [
    (None, "write.yaml: no such file"),
    (b"kind: \xff\n", "write.yaml: not UTF-8 text"),
])
def test_an_unreadable_write_names_the_file(tmp_path, content, expected):
    state = write_json(tmp_path / "state.json", klist(as_listed([tenant("a")])))
    if content is not None:
        (tmp_path / "write.yaml").write_bytes(content)
    result = CliRunner().invoke(command, ["--state", str(state), "--write", str(tmp_path / "write.yaml")])
    _bad_input(result, expected)


def test_null_fields_are_absent_not_malformed(tmp_path):
    # kubectl writes null for an unset field: read as empty, as the API server does.
    empty = _with(_with(pod("tenant-a", "q", {}), ("spec", "containers"), None), ("status",), None)
    state = [tenant("a", quotas={"cpu": 4}), pod("tenant-a", "p", {"cpu": "5"}), empty,
             quota("tenant-b", "q", {"limits.cpu": "1"}), _with(quota("tenant-a", "r", {}), ("status", "used"), None)]
    result = run_check(tmp_path, state)
    assert result.exit_code == 1 and "used 5 (limits.cpu)" in result.output, result.output
