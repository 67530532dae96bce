"""cozyrender.chartdocs and `cozyrender chart docs`: the `## @param` grammar,
the schema and README it generates (checked against Cozystack's own
cozyvalues-gen output), the overlay merge, and check mode."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cozyrender.chartdocs import DocsError, generate, plan, schema_for
from cozyrender.chartdocs.grammar import parse, parse_type
from cozyrender.chartdocs.readme import render_section, splice, tables
from cozyrender.chartdocs.schema import QUANTITY_PATTERN, build_schema, deep_merge

ROOT = Path(__file__).resolve().parent.parent
UPSTREAM = ROOT / "tests" / "data" / "chartdocs-upstream"
CHARTS = [ROOT / "charts" / "tenant", ROOT / "charts" / "cozystack-basics"]


def schema_of(text: str) -> dict[str, Any]:
    return build_schema(parse(text))


def prop(text: str, name: str) -> dict[str, Any]:
    return schema_of(text)["properties"][name]


# ---------------------------------------------------------------- Cozystack's own output

@pytest.mark.parametrize("app", sorted(p.name for p in UPSTREAM.iterdir() if p.is_dir()))
def test_schema_equals_cozyvalues_gen(app: str) -> None:
    folder = UPSTREAM / app
    ours = schema_of((folder / "values.yaml").read_text())
    assert ours == json.loads((folder / "values.schema.json").read_text())


@pytest.mark.parametrize("app", sorted(p.parent.name for p in UPSTREAM.glob("*/README.md")))
def test_readme_equals_cozyvalues_gen(app: str) -> None:
    folder = UPSTREAM / app
    readme = (folder / "README.md").read_text()
    assert splice(readme, render_section(parse((folder / "values.yaml").read_text())),
                  app) == readme


def test_upstream_data_covers_the_grammar() -> None:
    text = "\n".join(p.read_text() for p in UPSTREAM.glob("*/values.yaml"))
    for tag in ("@section", "@param", "@typedef", "@field", "@enum", "@value", "@immutable",
                "@x-cozystack-options", "{*bool}", "map[string]", "{[]", "{quantity}", "] -"):
        assert tag in text, tag


# ---------------------------------------------------------------- grammar and types

BASIC = """\
## @section Common parameters

## @param {string} [host] - The host.
host: ""

## @param {int} replicas - How many.
replicas: 2

## @param {quantity} size - Disk size.
size: 10Gi

## @param {bool} [gateway] - Left out of values.yaml on purpose.

## @param {float} ratio - A ratio.
ratio: 1.5
"""


def test_primitive_types_defaults_and_order() -> None:
    schema = schema_of(BASIC)
    assert schema["title"] == "Chart Values" and schema["type"] == "object"
    assert list(schema["properties"]) == ["host", "replicas", "size", "gateway", "ratio"]
    assert "required" not in schema and "additionalProperties" not in schema
    props = schema["properties"]
    assert props["host"] == {"description": "The host.", "type": "string", "default": ""}
    assert props["replicas"] == {"description": "How many.", "type": "integer", "default": 2}
    assert props["size"] == {"description": "Disk size.", "default": "10Gi",
                             "pattern": QUANTITY_PATTERN,
                             "anyOf": [{"type": "integer"}, {"type": "string"}],
                             "x-kubernetes-int-or-string": True}
    assert props["gateway"] == {"description": "Left out of values.yaml on purpose.",
                                "type": "boolean"}  # no value, no default
    assert props["ratio"]["type"] == "number"


STRUCTS = """\
## @typedef {struct} Resources - Sizing.
## @field {quantity} [cpu] - CPU.
## @field {quantity} memory - Memory.
## @field {*bool} enabled - Tri-state.
## @field {[]string} tags - Tags.
## @field {map[string]string} labels - Labels.

## @typedef {struct} User - A user.
## @field {string} [password] - Password.
## @field {Resources} resources - Its sizing.

## @enum {string} Preset - A preset.
## @value small
## @value large - the big one

## @param {Resources} resources - Explicit sizing.
resources:
  memory: 1Gi

## @param {map[string]User} users - Users.
users: {}

## @param {[]User} admins - Admins.
admins: []

## @param {Preset} preset="small" - Preset.

## @param {object} extra - Anything.
extra: {}
"""


def test_structs_required_nested_defaults_maps_lists_and_enums() -> None:
    props = schema_of(STRUCTS)["properties"]
    resources = props["resources"]
    assert resources["type"] == "object" and resources["default"] == {}
    # only plain named types without [..] are required; pointers, lists, maps never
    assert resources["required"] == ["memory"]
    assert list(resources["properties"]) == ["cpu", "enabled", "labels", "memory", "tags"]
    assert resources["properties"]["memory"]["default"] == "1Gi"  # from the nested value
    assert "default" not in resources["properties"]["cpu"]
    assert resources["properties"]["enabled"] == {"description": "Tri-state.", "type": "boolean"}
    assert resources["properties"]["tags"]["items"] == {"type": "string"}
    assert resources["properties"]["labels"]["additionalProperties"] == {"type": "string"}
    users = props["users"]
    assert users["type"] == "object" and users["default"] == {}
    user = users["additionalProperties"]
    assert user["required"] == ["resources"]
    assert user["properties"]["resources"]["required"] == ["memory"]
    assert "default" not in user["properties"]["resources"]  # elements carry no defaults
    assert props["admins"]["items"] == user
    assert props["preset"] == {"description": "Preset.", "type": "string", "default": "small",
                               "enum": ["small", "large"]}
    assert props["extra"] == {"description": "Anything.", "type": "object", "default": {},
                              "x-kubernetes-preserve-unknown-fields": True}


def test_immutable_and_extensions() -> None:
    props = schema_of("## @param {string} storageClass - SC.\n## @immutable\n"
                      "## @x-cozystack-options {source: storageclass}\nstorageClass: \"\"\n"
                      "## @param {any} [free] - Anything at all.\n")["properties"]
    assert props["storageClass"]["x-kubernetes-validations"] == [
        {"rule": "self == oldSelf", "message": "storageClass is immutable"}]
    assert props["storageClass"]["x-cozystack-options"] == {"source": "storageclass"}
    assert props["free"] == {"description": "Anything at all."}


@pytest.mark.parametrize("text, form", [
    ("string", "string"), ("*bool", "*bool"), ("[]map[string]Foo", "[]map[string]Foo"),
    ("map[string]quantity", "map[string]quantity"), ("**x", "**x")])
def test_type_expressions_round_trip(text: str, form: str) -> None:
    assert str(parse_type(text)) == form


@pytest.mark.parametrize("bad", ["", "map[int]x", "[]", "a b", "x-y", "map[string]"])
def test_bad_type_expressions(bad: str) -> None:
    with pytest.raises(ValueError):
        parse_type(bad)


@pytest.mark.parametrize("text, message", [
    ("## @param {Nope} x - y\nx: 1\n", "values.yaml:1: unknown type 'Nope' for x"),
    ("## @field {string} x - y\n", "values.yaml:1: @field outside a @typedef"),
    ("## @value a\n", "@value outside an @enum"),
    ("## @param {string} x - a\n## @param {string} x - b\n", "values.yaml:2: @param x is declared twice"),
    ("## @typedef {struct} A - a\n## @field {A} self - loop\n", "type A contains itself"),
    ("## @typedef {struct} string - a\n", "string is a built-in type"),
    ("## @param string x - no braces\n", "values.yaml:1: wants '{type} name - description'"),
    ("## @frobnicate\n", "unknown tag @frobnicate"),
    ("## @param {map[int]x} x - bad\n", "bad type"),
    ("## @immutable\n", "@immutable does not follow"),
    ("## @param {string} x - a\nx: [unclosed\n", "invalid YAML"),
    ("## @param {string} x - a\n- a list\n", "values must be a mapping"),
    ("## @param {string} x - a\nx: a\ny: 1\nz: 2\n",
     "values.yaml: values without a ## @param comment: y, z"),
    ("## @param {string} no - a\nno: a\n", "values.yaml: top-level key False is not a string"),
])
def test_errors_name_file_and_line(text: str, message: str) -> None:
    with pytest.raises(DocsError, match=__import__("re").escape(message)):
        parse(text)


# ---------------------------------------------------------------- README table

def test_readme_rows_and_layout() -> None:
    model = parse(STRUCTS)
    [(title, rows)] = tables(model)
    assert title == ""
    assert [(r.name, r.type, r.value) for r in rows] == [
        ("resources", "object", "{}"),
        ("resources.cpu", "quantity", '""'),
        ("resources.memory", "quantity", "1Gi"),
        ("resources.enabled", "*bool", "null"),
        ("resources.tags", "[]string", "[]"),
        ("resources.labels", "map[string]string", "{}"),
        ("users", "map[string]object", "{}"),
        ("users[name].password", "string", '""'),
        ("users[name].resources", "object", "{}"),
        ("users[name].resources.cpu", "quantity", '""'),
        ("users[name].resources.memory", "quantity", '""'),
        ("users[name].resources.enabled", "*bool", "null"),
        ("users[name].resources.tags", "[]string", "[]"),
        ("users[name].resources.labels", "map[string]string", "{}"),
        ("admins", "[]object", "[]"),
        ("admins[i].password", "string", '""'),
        ("admins[i].resources", "object", "{}"),
        ("admins[i].resources.cpu", "quantity", '""'),
        ("admins[i].resources.memory", "quantity", '""'),
        ("admins[i].resources.enabled", "*bool", "null"),
        ("admins[i].resources.tags", "[]string", "[]"),
        ("admins[i].resources.labels", "map[string]string", "{}"),
        ("preset", "string", "small"),
        ("extra", "object", "{}"),
    ]
    section = render_section(model)
    lines = section.splitlines()
    assert lines[0] == "## Parameters"
    table = [line for line in lines if line.startswith("|")]
    assert len(table) == 2 + len(rows)
    assert len({len(line.encode()) for line in table}) == 1  # padded to one width


def test_cells_escape_pipes_and_newlines() -> None:
    section = render_section(parse("## @param {string} x - a | b\nx: \"p|q\"\n"))
    assert "a \\| b" in section
    assert "`p|q`" in section  # code spans keep their text (upstream does the same)


def test_splice_replaces_only_the_parameters_section() -> None:
    readme = "# t\n\nintro\n\n## Parameters\n\nold table\n\n## Configuration\n\nkept\n"
    new = splice(readme, "## Parameters\n\nNEW\n\n", "t")
    assert new == "# t\n\nintro\n\n## Parameters\n\nNEW\n\n\n## Configuration\n\nkept\n"
    assert splice(new, "## Parameters\n\nNEW\n\n", "t") == new
    assert splice("# t\n\nintro\n", "## Parameters\n\nX\n", "t") == (
        "# t\n\nintro\n\n## Parameters\n\nX\n")
    assert splice("", "## Parameters\n\nX\n", "chart") == "# chart\n\n## Parameters\n\nX\n"


# ---------------------------------------------------------------- overlay

def test_overlay_merges_replaces_and_deletes() -> None:
    model = parse(STRUCTS)
    overlay = {"additionalProperties": False,
               "properties": {"resources": {"required": ["cpu"], "default": None,
                                            "properties": {"cpu": {"minLength": 1}}},
                              "new": {"type": "string"}}}
    schema = schema_for(model, overlay)
    assert schema["additionalProperties"] is False
    resources = schema["properties"]["resources"]
    assert resources["required"] == ["cpu"]          # lists replace
    assert "default" not in resources                 # null deletes
    assert resources["properties"]["cpu"]["minLength"] == 1           # objects merge
    assert resources["properties"]["cpu"]["pattern"] == QUANTITY_PATTERN  # and keep the rest
    assert schema["properties"]["new"] == {"type": "string"}
    assert schema_for(model, None) == build_schema(model)
    with pytest.raises(DocsError, match="JSON object"):
        schema_for(model, [1])


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=5),
                    lambda inner: st.lists(inner, max_size=3)
                    | st.dictionaries(st.text(max_size=3), inner, max_size=3), max_leaves=12)
OBJECTS = st.dictionaries(st.text(max_size=3), JSON, max_size=4)


def without_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: without_nulls(v) for k, v in value.items() if v is not None}
    return value


@given(OBJECTS, OBJECTS)
@settings(max_examples=200)
def test_deep_merge_properties(base: dict, overlay: dict) -> None:
    before = json.dumps([base, overlay], sort_keys=True)
    merged = deep_merge(base, overlay)
    assert json.dumps([base, overlay], sort_keys=True) == before  # inputs untouched
    assert deep_merge(merged, overlay) == merged                    # idempotent
    for key, value in overlay.items():
        if value is None:
            assert key not in merged
        elif not isinstance(value, dict):
            assert merged[key] == value                             # the overlay wins
        elif not isinstance(base.get(key), dict):
            assert merged[key] == without_nulls(value)              # nulls delete everywhere
    for key in base:
        if key not in overlay:
            assert merged[key] == base[key]                         # the rest is kept


# keys YAML reads as themselves (not `no`, `on`, `null`, ... which YAML 1.1 turns into bools/null)
KEYS = st.from_regex(r"[a-z][a-zA-Z0-9]{0,6}", fullmatch=True).filter(
    lambda k: __import__("yaml").safe_load(k) == k)


@given(st.dictionaries(KEYS,
                       st.sampled_from(["string", "bool", "int", "quantity", "[]string",
                                        "map[string]int", "*bool", "object"]),
                       min_size=1, max_size=6))
@settings(max_examples=100)
def test_generated_schema_accepts_its_own_defaults(params: dict[str, str]) -> None:
    """A values.yaml whose keys all carry their zero value validates against the schema
    generated from it, and every param has a README row and a schema property."""
    zero = {"string": '""', "bool": "false", "int": "0", "quantity": "1Gi", "[]string": "[]",
            "map[string]int": "{}", "*bool": "true", "object": "{}"}
    text = "".join(f"## @param {{{t}}} {n} - {n} param.\n{n}: {zero[t]}\n"
                   for n, t in params.items())
    model = parse(text)
    schema = build_schema(model)
    jsonschema.Draft7Validator.check_schema(schema)
    jsonschema.validate(model.values, schema)
    assert set(schema["properties"]) == set(params)
    [(_, rows)] = tables(model)
    assert [r.name for r in rows] == list(params)


# ---------------------------------------------------------------- the charts and the command

@pytest.mark.parametrize("chart", CHARTS, ids=lambda p: p.name)
def test_charts_are_current(chart: Path) -> None:
    """CI's drift check: values.schema.json and the README table are what the
    values.yaml comments (and the overlay) generate."""
    stale = [u.diff() for u in plan(chart) if u.changed]
    assert stale == [], "run `cozyrender chart docs charts/...`:\n" + "".join(stale)


def cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cozyrender", "chart", "docs", *args],
                          capture_output=True, text=True, cwd=cwd)


def test_command_writes_then_check_passes_then_detects_drift(tmp_path: Path) -> None:
    chart = tmp_path / "demo"
    chart.mkdir()
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: demo\nversion: 0.1.0\n")
    (chart / "values.yaml").write_text(BASIC)
    (chart / "values.schema.overlay.json").write_text('{"additionalProperties": false}')
    proc = cli("--check", str(chart))
    assert proc.returncode == 1 and "+++ " in proc.stdout and "out of date" in proc.stderr
    assert not (chart / "values.schema.json").exists()  # check mode writes nothing
    proc = cli(str(chart))
    assert proc.returncode == 0, proc.stderr
    schema = json.loads((chart / "values.schema.json").read_text())
    assert schema["additionalProperties"] is False
    assert (chart / "README.md").read_text().startswith("# demo\n\n## Parameters\n")
    assert cli("--check", str(chart)).returncode == 0
    # drift: a new param in values.yaml, not regenerated
    (chart / "values.yaml").write_text(BASIC + "## @param {bool} newKey - New.\nnewKey: true\n")
    proc = cli("--check", str(chart))
    assert proc.returncode == 1
    assert '+    "newKey": {' in proc.stdout and "+| `newKey`" in proc.stdout
    # drift: a hand edit of the generated schema
    cli(str(chart))
    (chart / "values.schema.json").write_text("{}\n")
    assert cli("--check", str(chart)).returncode == 1


def test_command_reports_bad_input_in_one_line(tmp_path: Path) -> None:
    chart = tmp_path / "bad"
    chart.mkdir()
    (chart / "values.yaml").write_text("## @param {Nope} x - y\nx: 1\n")
    proc = cli(str(chart))
    assert proc.returncode == 2 and proc.stdout == ""  # bad input (issue 19 item 8: it was `Error: ...`, exit 1)
    assert proc.stderr.startswith("cozyrender chart docs: error: ")
    assert proc.stderr.strip().endswith("values.yaml:1: unknown type 'Nope' for x")
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    (chart / "values.yaml").write_text("## @param {string} x - y\nx: a\n")
    (chart / "values.schema.overlay.json").write_text("{nope")
    proc = cli(str(chart))
    assert proc.returncode == 2 and "invalid JSON" in proc.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    assert "no values.yaml" in cli(str(empty)).stderr


def test_generate_is_pure() -> None:
    schema_text, readme = generate(BASIC, "", None, "x")
    assert json.loads(schema_text) == build_schema(parse(BASIC))
    assert schema_text.endswith("}\n") and readme.startswith("# x\n\n## Parameters\n")


def test_basics_schema_keeps_platform_keys_open(tmp_path: Path) -> None:
    shutil.copytree(CHARTS[1], tmp_path / "basics")
    schema = json.loads((tmp_path / "basics" / "values.schema.json").read_text())
    jsonschema.validate({"_cluster": {"root-host": None, "bundle-name": "x",
                                      "gateway-enabled": True, "gpu-vgpu": "true"},
                         "other": 1}, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"_cluster": {"gpu-vgpu": "on"}}, schema)
