"""Issue 19 item 9: `check -o table` is a table and `-o wide` the same table
with more columns (the shared formatter, cozyrender.columns);
`-o text` keeps the line format of earlier releases."""

from __future__ import annotations

from click.testing import CliRunner

from cozyrender.commands.check import command
from cozyrender.columns import Column, render
from tests.conftest import ROOT

STATE = ROOT / "examples" / "budgets" / "state"


def _out(*args: str) -> list[str]:
    result = CliRunner().invoke(command, ["--state", str(STATE), *args])
    assert result.exit_code == 0, result.output
    return result.stdout.splitlines()


def test_audit_table_and_wide_are_aligned_columns():
    table, wide, text = _out(), _out("-o", "wide"), _out("-o", "text")
    assert table[0].split() == ["SEVERITY", "KIND", "NAMESPACE", "FIELD", "MESSAGE"]
    assert wide[0].split() == ["SEVERITY", "KIND", "NAMESPACE", "FIELD", "MESSAGE", "FIGURES"]
    assert len(table) == len(wide) == len(text) + 1 and table[-1] == wide[-1] == text[-1] == "0 errors, 1 warning"
    for lines in (table, wide):
        starts = [lines[0].index(h) for h in ("KIND", "NAMESPACE", "FIELD", "MESSAGE")]
        for row in lines[1:-1]:
            assert all(row[start - 3:start] == "   " and row[start] != " " for start in starts), row
    assert text[0].startswith("warning: tenant-acme-web: spec.resourceQuotas")  # the old lines, for scripts


def test_a_write_answer_then_its_reasons_as_a_table(tmp_path):
    vm = tmp_path / "vm.yaml"
    vm.write_text("apiVersion: apps.cozystack.io/v1alpha1\nkind: VMInstance\nmetadata:\n  name: v\n"
                  "  namespace: tenant-acme-ml\nspec:\n  gpus:\n  - name: nvidia.com/nope\n")
    result = CliRunner().invoke(command, ["--state", str(STATE), "--write", str(vm)])
    lines = result.stdout.splitlines()
    assert result.exit_code == 1 and lines[0] == "refused" and lines[1].split() == ["SEVERITY", "FIELD", "MESSAGE"]
    assert lines[2].startswith("error      spec.gpus[0]")


def test_the_formatter_aligns_right_columns_and_keeps_one_line_per_row():
    columns = (Column("A"), Column("N", right=True), Column("W", wide=True))
    assert render(columns, [("x", "1", "w"), ("long\ntext", "100", "")]) == (
        "A             N\n"
        "x             1\n"
        "long text   100\n")
    assert render(columns, [("x", "1", "w")], wide=True) == "A   N   W\nx   1   w\n"
