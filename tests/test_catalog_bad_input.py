"""`cozyrender catalog` on structurally wrong objects: one line naming the
file, the object and the field, exit 2, never a traceback, never a value
silently skipped. One case per reviewer reproducer."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from cozyrender.commands.catalog import command
from tests.conftest import replaced

CLASS = {
    "apiVersion": "cozystack.io/v1alpha1", "kind": "GPUClass",
    "metadata": {"name": "a100", "creationTimestamp": "2026-01-01T00:00:00Z"},
    "spec": {"vendor": "nvidia", "model": "A100", "mode": "passthrough", "memory": "40Gi",
             "sourceKind": "PCIHostDevice", "resourceName": "nvidia.com/a100"},
}
NODE = {
    "apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"}, "spec": {"taints": []},
    "status": {"allocatable": {"nvidia.com/a100": "2"}, "conditions": [{"type": "Ready", "status": "True"}]},
}
POD = {
    "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ns"},
    "spec": {"nodeName": "n", "containers": [{"resources": {"limits": {"nvidia.com/a100": 1}}}]},
    "status": {"phase": "Running"},
}


_with = replaced


CASES = {
    "node status 5": ([CLASS, _with(NODE, ("status",), 5)], "Node n: status is not an object (got 5)"),
    "node allocatable 5": ([CLASS, _with(NODE, ("status", "allocatable"), 5)],
                           "Node n: status.allocatable is not an object (got 5)"),
    "node allocatable lots": ([CLASS, _with(NODE, ("status", "allocatable", "nvidia.com/a100"), "lots")],
                              "Node n: status.allocatable.nvidia.com/a100 is not a Kubernetes quantity (got 'lots')"),
    "node taints 5": ([CLASS, _with(NODE, ("spec", "taints"), 5)], "Node n: spec.taints is not a list (got 5)"),
    "node conditions [5]": ([CLASS, _with(NODE, ("status", "conditions"), [5])],
                            "Node n: status.conditions[0] is not an object (got 5)"),
    "node unschedulable string": ([CLASS, _with(NODE, ("spec", "unschedulable"), "false")],
                                  "Node n: spec.unschedulable is not a boolean"),
    "node metadata 5": ([CLASS, _with(NODE, ("metadata",), 5)], "Node: metadata is not an object"),
    "pod containers 5": ([CLASS, NODE, _with(POD, ("spec", "containers"), 5)],
                         "Pod ns/p: spec.containers is not a list (got 5)"),
    "pod spec 5": ([CLASS, NODE, _with(POD, ("spec",), 5)], "Pod ns/p: spec is not an object (got 5)"),
    "pod quantity": ([CLASS, NODE, _with(POD, ("spec", "containers", 0, "resources", "limits", "nvidia.com/a100"), "lots")],
                     "Pod ns/p: spec.containers[0].resources.limits.nvidia.com/a100 is not a Kubernetes quantity (got 'lots')"),
    "pod nodeName [1]": ([CLASS, NODE, _with(POD, ("spec", "nodeName"), [1])], "Pod ns/p: spec.nodeName is not a string"),
    "class spec 5": ([_with(CLASS, ("spec",), 5), NODE], "GPUClass a100: spec is not an object (got 5)"),
    "class resourceName [1]": ([_with(CLASS, ("spec", "resourceName"), [1]), NODE],
                               "GPUClass a100: spec.resourceName is not a string (got [1])"),
    "class metadata 5": ([_with(CLASS, ("metadata",), 5), NODE], "GPUClass: metadata is not an object (got 5)"),
    # Ranking it as the newest would be a guess about who holds the resource.
    "class creationTimestamp": ([_with(CLASS, ("metadata", "creationTimestamp"), "yesterday"), NODE],
                                "GPUClass a100: metadata.creationTimestamp is not an RFC 3339 timestamp (got 'yesterday')"),
    "class tolerations 5": ([_with(CLASS, ("spec", "tolerations"), 5), NODE], "GPUClass a100: spec.tolerations is not a list"),
    "class toleration key": ([_with(CLASS, ("spec", "tolerations"), [{"key": 5}]), NODE],
                             "GPUClass a100: spec.tolerations[0].key is not a string"),
    "class memory map": ([_with(CLASS, ("spec", "memory"), {"a": 1}), NODE], "GPUClass a100: spec.memory is not a quantity"),
}


@pytest.mark.parametrize("objects,expected", CASES.values(), ids=list(CASES))
def test_a_malformed_object_is_bad_input_naming_file_object_and_field(tmp_path, objects, expected):
    (tmp_path / "state.json").write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))
    result = CliRunner().invoke(command, ["--state", str(tmp_path / "state.json")])
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert result.output.startswith(f"cozyrender catalog: error: {tmp_path / 'state.json'}: {expected}"), result.output
    assert result.output.count("\n") == 1 and "Traceback" not in result.output


def test_the_well_formed_state_reads(tmp_path):
    (tmp_path / "state.json").write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": [CLASS, NODE, POD]}))
    result = CliRunner().invoke(command, ["--state", str(tmp_path / "state.json"), "-o", "json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["gpuClasses"][0]["freeUnits"] == 1


def test_invalid_yaml_is_one_line(tmp_path):
    (tmp_path / "state.yaml").write_text("kind: [\n")
    result = CliRunner().invoke(command, ["--state", str(tmp_path / "state.yaml")])
    assert result.exit_code == 2 and result.output.count("\n") == 1, result.output
    assert f"{tmp_path / 'state.yaml'}: not valid YAML: line 2, column 1: " in result.output


# ---------------------------------------------------------------- one object, read twice

EXAMPLE = __import__("pathlib").Path(__file__).parent.parent / "examples" / "cluster"


def _catalog(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(command, list(args))
    return result.exit_code, result.output


def test_objects_read_twice_are_counted_once():
    """Overlapping inputs (a folder and a file in it) hold each node and pod
    twice; the figures must not double."""
    once = CliRunner().invoke(command, ["--state", str(EXAMPLE), "-o", "json"])
    twice = CliRunner().invoke(command, ["--state", str(EXAMPLE), "--state", str(EXAMPLE / "nodes.yaml"),
                                         "--state", str(EXAMPLE / "pods.yaml"), "-o", "json"])
    assert once.exit_code == twice.exit_code == 0 and twice.stdout == once.stdout
    # What was read says the overlap: the same objects, more files.
    assert once.stderr.startswith("cozyrender catalog: read 3 files (5 GPUClass, 7 Node, 8 Pod)")
    assert twice.stderr.startswith("cozyrender catalog: read 5 files (5 GPUClass, 14 Node, 16 Pod)")


@pytest.mark.parametrize("order", ["first", "last"])
def test_two_different_copies_of_a_class_are_bad_input_in_any_order(tmp_path, order):
    other = replaced(CLASS, ("apiVersion",), "cozystack.io/v1beta1")
    other = replaced(other, ("spec", "model"), "H100")
    objects = [CLASS, other] if order == "first" else [other, CLASS]
    (tmp_path / "a.json").write_text(json.dumps(objects[0]))
    (tmp_path / "b.json").write_text(json.dumps(objects[1]))
    code, output = _catalog("--state", str(tmp_path))
    assert code == 2 and "two different copies of one object" in output
    assert "a.json" in output and "b.json" in output
