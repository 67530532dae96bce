"""`cozyrender check` against a tenant administrator's moves, after issue 11:
one regression test per finding of the adversarial review (each through the
CLI), then the attacks that held, as properties."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from test_budgets_builders import classes, klist, run_check, tenant, vm, write_json

from cozyrender.commands.check import command

A100 = "a100.gpuclass.cozystack.io/devices"


def _invoke(*args: str):
    return CliRunner().invoke(command, list(args))


def _bad_input(result, *expected: str) -> None:
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output
    assert result.output.startswith("error: ") and result.output.count("\n") == 1, result.output
    for text in expected:
        assert text in result.output, (text, result.output)


# -- finding 1: copies equal only under Python's `==` -------------------------------

@pytest.mark.parametrize("other", [True, 1.0], ids=["true", "1.0"])
@pytest.mark.parametrize("order", ["one first", "other first"])
def test_copies_equal_only_as_python_values_are_two_different_copies_in_any_order(tmp_path, other, order):
    """`1`, `1.0` and `true` are equal to Python but not to the rules (a budget
    of `true` counts as 0, a count of `1.0` is bad input): two copies that
    differ only so were one object, and which copy was read first decided
    between admitted and refused."""
    one = tenant("a", quotas={A100: 1})
    two = dict(tenant("a", quotas={A100: other}), apiVersion="apps.cozystack.io/v1beta1")
    copies = [one, two] if order == "one first" else [two, one]
    result = run_check(tmp_path, [*classes(), *copies], vm("tenant-a", "v", [{"class": "a100", "count": 1}]))
    _bad_input(result, "two different copies of one object (Tenant apps.cozystack.io")
