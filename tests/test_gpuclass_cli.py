"""`cozyrender gpuclass validate FILE [--old FILE]`: exit 0 valid, 1 invalid, 2 bad input."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from cozyrender.commands.gpuclass import command

DATA = Path(__file__).parent / "data" / "gpuclass"
EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "cluster" / "gpuclasses.yaml"


def run(*args: str, stdin: str | None = None):
    return CliRunner().invoke(command, ["validate", *args], input=stdin)


def test_valid_classes_exit_0():
    for name in ("passthrough", "vgpu", "mig"):
        result = run(str(DATA / f"{name}.yaml"))
        assert result.exit_code == 0, result.output
        assert "valid (create)" in result.output
    result = run(str(EXAMPLE))  # a kind: List as kubectl writes it
    assert result.exit_code == 0 and result.output.count("valid (create)") == 5


def test_an_invalid_update_exits_1_naming_each_failure(tmp_path):
    changed = yaml.safe_load((DATA / "vgpu.yaml").read_text())
    changed["spec"]["mode"] = "passthrough"
    changed["spec"]["surprise"] = True
    path = tmp_path / "new.yaml"
    path.write_text(yaml.safe_dump(changed))
    result = run(str(path), "--old", str(DATA / "vgpu.yaml"))
    assert result.exit_code == 1
    assert "gpuclass/a100-4c: pruned unknown field spec.surprise" in result.output
    assert "gpuclass/a100-4c: invalid (update):" in result.output
    assert "  spec.mode: Invalid value: mode is immutable" in result.output
    assert "  spec.license: Invalid value: license is only for vgpu classes" in result.output
    # The same file as a create: no transition rule runs.
    assert "immutable" not in run(str(path)).output


def test_stdin():
    result = run("-", stdin=(DATA / "mig.yaml").read_text())
    assert result.exit_code == 0 and "gpuclass/h100-1g10gb: valid" in result.output


def test_bad_input_exits_2_without_a_traceback(tmp_path):
    not_yaml = tmp_path / "x.yaml"
    not_yaml.write_text("spec: [\n")
    no_class = tmp_path / "pod.yaml"
    no_class.write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n")
    for args in ([str(tmp_path / "missing.yaml")], [str(not_yaml)], [str(no_class)],
                 [str(DATA / "mig.yaml"), "--old", str(not_yaml)]):
        result = run(*args)
        assert result.exit_code == 2, (args, result.output)
        assert "Traceback" not in result.output and result.output.startswith("cozyrender gpuclass validate: error: ")


def test_an_unusable_crd_exits_2(tmp_path):
    crd = yaml.safe_load((Path(__file__).resolve().parent.parent / "charts" / "cozystack-basics" / "crds"
                          / "gpuclasses.cozystack.io.yaml").read_text())
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    schema["x-kubernetes-validations"].append({"rule": "self.nope(", "message": "broken"})
    broken = tmp_path / "crd.yaml"
    broken.write_text(yaml.safe_dump(crd))
    empty = tmp_path / "empty.yaml"
    empty.write_text("kind: CustomResourceDefinition\n")
    for path in (broken, empty):
        result = run(str(DATA / "mig.yaml"), "--crd", str(path))
        assert result.exit_code == 2 and "Traceback" not in result.output, result.output


@pytest.mark.parametrize("content,expected", [
    (b"apiVersion: cozystack.io/v1alpha1\nkind: GPUClass\nmetadata: 5\nspec: {}\n",
     "c.yaml: GPUClass: metadata is not an object (got 5)"),
    (b"apiVersion: cozystack.io/v1alpha1\nkind: GPUClass\nmetadata: {name: [1]}\n",
     "c.yaml: GPUClass <unnamed>: metadata.name is not a string (got [1])"),
    (b"kind: GPUClass\nmetadata: {name: \xff}\n", "c.yaml: not UTF-8 text"),
    (b"kind: GPUClass\nmetadata: {name: [a}\n", "c.yaml: not valid YAML: line 2, column "),
    (None, "c.yaml: no such file"),
])
def test_malformed_or_unreadable_input_is_one_line_naming_the_file(tmp_path, content, expected):
    if content is not None:
        (tmp_path / "c.yaml").write_bytes(content)
    for args in ([str(tmp_path / "c.yaml")], [str(DATA / "mig.yaml"), "--old", str(tmp_path / "c.yaml")]):
        result = run(*args)
        assert result.exit_code == 2, (args, result.output)
        assert result.output.startswith(f"cozyrender gpuclass validate: error: {tmp_path / 'c.yaml'}") and expected in result.output, result.output
        assert result.output.count("\n") == 1 and "Traceback" not in result.output
