"""Loading state (issue 12 item 6): YAML built from libyaml's events gives
exactly the safe loader's objects; what the builder leaves to the safe
loader (anchors, tags, merge keys, complex keys) is loaded the ordinary way;
a progress line appears only on a terminal; unreadable numbers and text are
one-line errors naming the file."""

from __future__ import annotations

import io
import json

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from cozyrender.state import Progress, StateError, load_objects
from cozyrender.yamlio import SafeLoader, Unsupported, iter_documents

CASES = [
    "a: 1\nb: 2.5\nc: true\nd: ~\ne: ''\nf: '1'\ng: 2026-01-01T00:00:00Z\nh: 2026-01-01\n",
    "a: yes\nb: No\nc: off\nd: 0x1F\ne: 0o17\nf: 1_000\ng: .inf\nh: -.5\ni: 1e3\nj: 1.0e3\nk: 0b101\n",
    "---\n---\na: 1\n...\n---\n- 1\n- [a, {b: c}]\n- {}\n- []\n",
    "a:\n  - b: 1\n    c:\n      d: |\n        text\n        more\n      e: >\n        folded\n",
    "? a\n: 1\nb: explicit key\n",
    "",
    "# only a comment\n",
    "x: \"quoted\\ttab\"\ny: 'single'\nz: plain text, with words\n",
]
FALLBACK = [
    "a: &x 1\nb: *x\n",
    "base: &b {x: 1}\nother:\n  <<: *b\n  y: 2\n",
    "a: !!str 5\n",
    "a: !!binary aGVsbG8=\n",
    "~: null key\n1: int key\ntrue: bool key\n",  # keys that are not strings: compared by their text there
    "? [a, b]\n: 1\n",
]
UNHASHABLE = FALLBACK[-1]  # the safe loader refuses it: an error naming the file


def _streamed(text: str) -> list:
    return list(iter_documents(text))


@pytest.mark.parametrize("text", CASES)
def test_the_builder_gives_the_safe_loaders_objects(text):
    assert _streamed(text) == list(yaml.load_all(text, Loader=SafeLoader))
    assert list(iter_documents(io.StringIO(text))) == list(yaml.load_all(text, Loader=SafeLoader))


@pytest.mark.parametrize("text", FALLBACK)
def test_what_the_builder_leaves_is_loaded_by_the_safe_loader(text, tmp_path):
    with pytest.raises(Unsupported):
        _streamed(text)
    if text == UNHASHABLE:
        (tmp_path / "s.yaml").write_text(text)
        with pytest.raises(StateError, match="s.yaml: not valid YAML: .*unhashable key"):
            load_objects([tmp_path / "s.yaml"])
        return
    (tmp_path / "s.yaml").write_text("kind: List\nitems:\n- kind: X\n  metadata: {name: n}\n  spec:\n"
                                     + "".join("    " + line + "\n" for line in text.splitlines()))
    loaded = load_objects([tmp_path / "s.yaml"])
    expected = yaml.load((tmp_path / "s.yaml").read_text(), Loader=SafeLoader)["items"]
    assert list(loaded) == expected


scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-10**20, 10**20), st.text(max_size=12),
    st.floats(allow_nan=False), st.sampled_from(["yes", "no", "on", "~", "0x10", "1e3", "2026-01-01", "<<", "="]),
)
trees = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)), max_leaves=25)


@settings(max_examples=200, deadline=None)
@given(st.lists(trees, min_size=1, max_size=3), st.sampled_from([None, True, False]))
def test_any_dumped_stream_reads_back_as_the_safe_loader_reads_it(documents, flow):
    text = yaml.safe_dump_all(documents, default_flow_style=flow, allow_unicode=True)
    try:
        streamed = _streamed(text)
    except Unsupported:
        return  # a merge key or the like: the safe loader's job
    assert streamed == list(yaml.load_all(text, Loader=SafeLoader))


def test_a_kubectl_list_loads_streamed_and_matches_json(tmp_path):
    items = [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"p{i}", "namespace": "tenant-a",
              "creationTimestamp": "2026-01-01T00:00:00Z"},
              "spec": {"containers": [{"name": "c", "resources": {"limits": {"cpu": "500m"}}}]},
              "status": {"phase": "Running"}} for i in range(50)]
    doc = {"apiVersion": "v1", "items": items, "kind": "List", "metadata": {"resourceVersion": ""}}
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(doc))
    (tmp_path / "s.json").write_text(json.dumps(doc))
    assert list(load_objects([tmp_path / "s.yaml"])) == list(load_objects([tmp_path / "s.json"])) == items


DUPLICATES = [  # (text, the key, the line of its second occurrence)
    ("a: 1\na: 2\n", "a", 2),
    ("kind: Tenant\nmetadata:\n  name: a\n  name: b\n", "name", 4),
    ("x: &a 1\ny: *a\nx: 3\n", "x", 3),          # left to the safe loader (an alias), refused there too
    ("1: a\n'1': b\n", "1", 2),                    # one key once YAML is JSON
    ("? a\n: 1\na: 2\n", "a", 3),
    ("- {k: 1, k: 2}\n", "k", 1),
    ("<<: {a: 1}\n<<: {b: 1}\n", "<<", 2),
]


@pytest.mark.parametrize("text,key,line", DUPLICATES)
def test_a_key_twice_in_one_mapping_is_refused_naming_file_line_and_key(tmp_path, text, key, line):
    """Issue 19 item 1: PyYAML keeps the last value silently; every reader refuses."""
    (tmp_path / "s.yaml").write_text(text)
    with pytest.raises(StateError) as caught:
        load_objects([tmp_path / "s.yaml"])
    message = str(caught.value)
    assert message.startswith(f"{tmp_path / 's.yaml'}: ") and f"line {line}," in message
    assert f"duplicate key {key!r}" in message and "\n" not in message
    with pytest.raises(yaml.YAMLError, match="duplicate key"):
        list(yaml.load_all(text, Loader=SafeLoader))


@pytest.mark.parametrize("text,line", [
    ('{"kind": "Tenant",\n "kind": "GPUClass"}', 2),
    ('{"items": [{"a": 1}, {"b": 1,\n\n "b": 2}]}', 3),
])
def test_a_key_twice_in_a_json_object_is_refused_too(tmp_path, text, line):
    (tmp_path / "s.json").write_text(text)
    with pytest.raises(StateError, match=rf"s.json: unreadable JSON: line {line}, column \d+: duplicate key"):
        load_objects([tmp_path / "s.json"])


def test_files_run_together_without_a_separator_are_refused(tmp_path):
    """The issue's `cat state/*.yaml | check --state -`: a GPUClass merged into a Tenant."""
    (tmp_path / "s.yaml").write_text("apiVersion: apps.cozystack.io/v1alpha1\nkind: Tenant\nmetadata:\n"
                                     "  name: a\napiVersion: cozystack.io/v1alpha1\nkind: GPUClass\n")
    with pytest.raises(StateError, match="line 5, column 1: duplicate key 'apiVersion'"):
        load_objects([tmp_path / "s.yaml"])


@pytest.mark.parametrize("name,text,why", [
    ("big.json", '{"kind": "Pod", "n": ' + "9" * 5000 + "}", "too long (at most 4300 digits)"),
    ("big.yaml", "kind: Pod\nn: " + "9" * 5000 + "\n", "too long (at most 4300 digits)"),
    ("bad.yaml", "a: [unclosed\n", "not valid YAML"),
    ("scalar.yaml", "just text\n", "not an object"),
])
def test_unreadable_state_is_one_line_naming_the_file(tmp_path, name, text, why):
    (tmp_path / name).write_text(text)
    with pytest.raises(StateError) as caught:
        load_objects([tmp_path / name])
    assert str(tmp_path / name) in str(caught.value) and why in str(caught.value)
    assert "\n" not in str(caught.value)


def test_not_utf8_is_an_error_naming_the_file(tmp_path):
    (tmp_path / "s.yaml").write_bytes(b"kind: Pod\nname: \xff\xfe\n")
    with pytest.raises(StateError, match="not UTF-8"):
        load_objects([tmp_path / "s.yaml"])


class _Terminal(io.StringIO):
    def __init__(self, tty: bool) -> None:
        super().__init__()
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


@pytest.mark.parametrize("tty", [True, False])
def test_progress_is_shown_only_on_a_terminal_and_only_after_the_delay(tty):
    stream = _Terminal(tty)
    progress = Progress(delay=0, stream=stream)
    report = progress.reporter("state.yaml", 1000)
    if report is not None:
        report(500)
    progress.done()
    if tty:
        assert "loading state.yaml: 50%" in stream.getvalue() and stream.getvalue().endswith("\r\x1b[K")
    else:
        assert stream.getvalue() == ""
    announced = _Terminal(tty)
    big = Progress(stream=announced)
    big.announce("state.json", 10)  # small: nothing
    big.announce("state.json", 100 * 2**20)
    big.done()
    assert ("loading state.json (100 MiB)" in announced.getvalue()) is tty
    assert "(0 MiB)" not in announced.getvalue()
    quiet = _Terminal(True)
    late = Progress(delay=3600, stream=quiet)
    late.reporter("state.yaml", 1000)(500)
    late.done()
    assert quiet.getvalue() == ""


def test_a_state_file_can_be_left_out_however_it_is_named(tmp_path):
    (tmp_path / "repo").mkdir()
    (tmp_path / "repo" / "a.yaml").write_text("kind: A\nmetadata: {name: a}\n")
    (tmp_path / "repo" / "b.yaml").write_text("kind: B\nmetadata: {name: b}\n")
    loaded = load_objects([tmp_path / "repo"], exclude=[tmp_path / "repo" / ".." / "repo" / "b.yaml"])
    assert [o["kind"] for o in loaded] == ["A"] and loaded.excluded == [str(tmp_path / "repo" / "b.yaml")]


def test_catalog_and_check_read_a_yaml_state_as_they_read_the_same_json(tmp_path):
    """Through the CLI: the bundled cluster as one `kubectl get -o yaml` List
    and as JSON gives the same catalog, and no progress line off a terminal."""
    from pathlib import Path

    from click.testing import CliRunner

    from cozyrender.commands.catalog import command as catalog
    from cozyrender.commands.check import command as check

    example = Path(__file__).resolve().parent.parent / "examples" / "cluster"
    objects = list(load_objects([example]))
    objects.append({"apiVersion": "apps.cozystack.io/v1alpha1", "kind": "Tenant",  # an audit needs one
                    "metadata": {"name": "a", "namespace": "tenant-root"}, "spec": {}})
    objects.append({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "tenant-root"}})  # and one
    document = {"apiVersion": "v1", "items": objects, "kind": "List", "metadata": {"resourceVersion": ""}}
    (tmp_path / "state.yaml").write_text(yaml.safe_dump(document))
    (tmp_path / "state.json").write_text(json.dumps(document))
    runner = CliRunner()
    as_yaml = runner.invoke(catalog, ["--state", str(tmp_path / "state.yaml")])
    as_json = runner.invoke(catalog, ["--state", str(tmp_path / "state.json")])
    assert as_yaml.exit_code == as_json.exit_code == 0, as_yaml.output
    assert as_yaml.stdout == as_json.stdout and "loading" not in as_yaml.output
    audits = [runner.invoke(check, ["--state", str(tmp_path / name), "-o", "json"]) for name in ("state.yaml", "state.json")]
    assert audits[0].exit_code == audits[1].exit_code == 0 and audits[0].stdout == audits[1].stdout
    assert "loading" not in audits[0].stderr
