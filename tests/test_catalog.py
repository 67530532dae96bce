"""`cozyrender catalog` on the bundled example cluster: a golden table, JSON,
and exit codes.

The golden file is compared byte for byte; a missing or different file fails
with a unified diff. To accept a deliberate change, run with
COZYRENDER_UPDATE_GOLDEN=1 (then the test writes the file and still fails,
so an update is never silent)."""

from __future__ import annotations

import difflib
import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from cozyrender.cli import _click_main
from cozyrender.commands.catalog import command as catalog_command
from cozyrender.gpuclass.catalog import catalog_rows
from cozyrender.state import load_objects

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "cluster"
GOLDEN = Path(__file__).parent / "data" / "gpuclass" / "catalog.golden.txt"


def test_table_matches_the_golden_file():
    table = CliRunner().invoke(catalog_command, ["--state", str(EXAMPLE)]).stdout
    if os.environ.get("COZYRENDER_UPDATE_GOLDEN"):
        GOLDEN.write_text(table)
        pytest.fail(f"wrote {GOLDEN}; review it and rerun without COZYRENDER_UPDATE_GOLDEN")
    if not GOLDEN.exists():
        pytest.fail(f"{GOLDEN} is missing: run with COZYRENDER_UPDATE_GOLDEN=1 to write it")
    expected = GOLDEN.read_text()
    diff = "".join(difflib.unified_diff(expected.splitlines(True), table.splitlines(True),
                                        str(GOLDEN), "cozyrender catalog --state examples/cluster"))
    assert table == expected, diff


def test_example_figures():
    rows = {row.name: row for row in catalog_rows(load_objects([EXAMPLE]))}
    assert list(rows) == sorted(rows)
    # gpu-a1 eligible (one of two used, a Succeeded pod ignored); gpu-a2 cordoned.
    assert (rows["a100-40g"].free_units, rows["a100-40g"].allocatable_units, rows["a100-40g"].eligible_nodes) == ("1", "2", 1)
    assert rows["a100-full"].conflict_holder == "a100-40g" and rows["a100-40g"].conflict_holder is None
    # A sidecar adds to the app containers: 2 + 1 of 10.
    assert rows["a100-4c"].free_units == "7"
    # gpu-h1: init peak 2 and a bound Pending pod 1 of 7; gpu-h2 is NotReady.
    assert (rows["h100-1g10gb"].free_units, rows["h100-1g10gb"].eligible_nodes) == ("4", 1)
    # gpu-l1 carries a taint the class does not tolerate.
    assert rows["l40s"].eligible_nodes == 0


def test_json_output_for_scripts():
    result = CliRunner().invoke(catalog_command, ["--state", str(EXAMPLE), "-o", "json"])
    assert result.exit_code == 0, result.output
    items = {item["name"]: item for item in json.loads(result.stdout)["gpuClasses"]}
    assert items["a100-full"]["conflict"] == {"heldBy": "a100-40g"}
    assert items["a100-4c"]["freeUnits"] == 7 and items["a100-4c"]["profile"] == "A100-4C"
    assert items["a100-40g"]["conflict"] is None and items["a100-40g"]["resourceName"] == "nvidia.com/GA100_A100_PCIE_40GB"


def test_table_through_the_cli_dispatcher(capsys):
    with pytest.raises(SystemExit) as exit_info:
        _click_main(["catalog", "--state", str(EXAMPLE / "nodes.yaml"), "--state", str(EXAMPLE / "pods.yaml"),
                     "--state", str(EXAMPLE / "gpuclasses.yaml")])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out == GOLDEN.read_text()


def test_bad_input_exits_2_without_a_traceback(tmp_path):
    broken = tmp_path / "broken.yaml"
    broken.write_text("kind: [\n")
    for args in (["--state", str(tmp_path / "missing")], ["--state", str(broken)]):
        result = CliRunner().invoke(catalog_command, args)
        assert result.exit_code == 2 and "Traceback" not in result.output
        assert result.exception is None or isinstance(result.exception, SystemExit)


def test_a_malformed_quantity_in_the_state_is_bad_input(tmp_path):
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"},
            "status": {"allocatable": {"r/x": "2"}, "conditions": [{"type": "Ready", "status": "True"}]}}
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
           "spec": {"nodeName": "n", "containers": [{"resources": {"limits": {"r/x": "two"}}}]}}
    klass = {"apiVersion": "cozystack.io/v1alpha1", "kind": "GPUClass", "metadata": {"name": "c"},
             "spec": {"resourceName": "r/x"}}
    (tmp_path / "state.json").write_text(json.dumps({"kind": "List", "items": [node, pod, klass]}))
    result = CliRunner().invoke(catalog_command, ["--state", str(tmp_path)])
    assert result.exit_code == 2 and "'two'" in result.output


def test_no_classes_prints_only_the_header(tmp_path):
    (tmp_path / "nodes.yaml").write_text("apiVersion: v1\nkind: Node\nmetadata: {name: n}\n")
    result = CliRunner().invoke(catalog_command, ["--state", str(tmp_path)])
    assert result.exit_code == 0 and result.stdout.startswith("NAME") and result.stdout.count("\n") == 1


def test_an_empty_state_is_bad_input_not_an_empty_catalog(tmp_path):
    """Issue 19 item 2: an empty (or unread) state must not answer green."""
    (tmp_path / "empty.yaml").write_text("")
    result = CliRunner().invoke(catalog_command, ["--state", str(tmp_path)])
    assert result.exit_code == 2 and "the state holds no object (1 file read" in result.output


# ---------------------------------------------------------------- issue 19 item 3: the CRD's rules

def _klass(name: str, **spec) -> dict:
    base = {"vendor": "NVIDIA", "model": "A100", "mode": "passthrough", "memory": "40Gi",
            "resourceName": f"nvidia.com/{name.lower().replace('_', '-')}", "sourceKind": "PCIHostDevice"}
    body = {"apiVersion": "cozystack.io/v1alpha1", "kind": "GPUClass", "metadata": {"name": name}}
    if spec.get("spec", True) is not None:
        body["spec"] = {**base, **{k: v for k, v in spec.items() if k != "spec"}}
    return body


@pytest.mark.parametrize(("klass", "reason"), [
    (_klass("Bad_Name"), "metadata.name: Invalid value: 'Bad_Name'"),
    (_klass("negative", memory="-1Gi"), "spec.memory"),
    (_klass("budget", resourceName="a100.gpuclass.cozystack.io/devices"), "spec.resourceName"),
    (_klass("nospec", spec=None), "spec: Required value"),
], ids=["name", "negative-memory", "budget-domain", "no-spec"])
def test_a_class_the_crd_refuses_is_invalid_with_the_reason(klass, reason, tmp_path):
    """The catalog showed these four as `ok`; it runs the CRD's rules now."""
    good = _klass("good")
    (tmp_path / "state.json").write_text(json.dumps({"kind": "List", "items": [good, klass]}))
    table = CliRunner().invoke(catalog_command, ["--state", str(tmp_path)])
    assert table.exit_code == 0, table.output
    rows = {line.split()[0]: line for line in table.stdout.splitlines()[1:]}
    assert rows["good"].endswith("   ok")
    assert f"INVALID ({reason}" in rows[klass["metadata"]["name"]], rows
    wide = CliRunner().invoke(catalog_command, ["--state", str(tmp_path), "-o", "wide"])
    assert f"INVALID ({reason}" in wide.stdout
    data = json.loads(CliRunner().invoke(catalog_command, ["--state", str(tmp_path), "-o", "json"]).stdout)
    by_name = {item["name"]: item for item in data["gpuClasses"]}
    assert by_name["good"]["invalid"] is None and reason in by_name[klass["metadata"]["name"]]["invalid"]


# ---------------------------------------------------------------- issue 19 item 9: -o wide is more columns

def test_wide_is_the_table_with_more_columns_not_more_lines():
    table = CliRunner().invoke(catalog_command, ["--state", str(EXAMPLE)]).stdout.splitlines()
    wide = CliRunner().invoke(catalog_command, ["--state", str(EXAMPLE), "-o", "wide"]).stdout.splitlines()
    assert len(wide) == len(table)
    assert wide[0].split() == ["NAME", "VENDOR/MODEL", "MODE/PROFILE", "MEMORY", "SOURCE", "LICENSE", "TOLERATIONS",
                               "RESOURCE", "FREE", "ALLOCATABLE", "NODES", "STATUS"]
    for narrow, broad in zip(table, wide):
        assert broad.split()[:4] == narrow.split()[:4] and broad.split()[-1] == narrow.split()[-1]
    starts = {line.index("STATUS") for line in wide[:1]}
    assert all(len(line) >= min(starts) for line in wide[1:])  # every row reaches the STATUS column
