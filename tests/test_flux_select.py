"""Finding the HelmRelease meant in a GitOps file (`flux.helmrelease`), the
plan the filter hands to the editor (`flux.filters`), and the stream reader
and writer (`flux.stream`): other documents are kept byte for byte."""

from __future__ import annotations

import hashlib
import string

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from cozyrender import flux
from cozyrender.flux.filters import INSERT, KEEP, REMOVE, REPLACE


def entry(value: str = "1") -> dict:
    return {"kustomize": {"patches": [{"target": {"kind": "Namespace", "name": "tenant-a"},
                                       "patch": f"{flux.MARKER}\n- op: add\n  path: /x\n  value: '{value}'\n"}]}}


def hr(name: str, namespace: str = "tenant-root", spec: str = "  interval: 5m\n") -> str:
    return (f"apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n  name: {name}\n"
            f"  namespace: {namespace}\nspec:\n{spec}")


# ---------------------------------------------------------------- Flux's release name

# fluxcd/helm-controller internal/release/name_test.go, TestShortName (Apache-2.0),
# at 0f61a8607a62be64638f2f912d9487e653960a6e.
SHORTEN_TABLE = [
    ("release-name", "release-name"),
    ("release-name-with-very-long-name-which-is-longer-than-53-characters",
     "release-name-with-very-long-name-which-i-788ca0d0d7b0"),
    ("another-release-name-with-very-long-name-which-is-longer-than-53-characters",
     "another-release-name-with-very-long-name-7e72150d5a36"),
    ("", ""),
]


@pytest.mark.parametrize("name, expected", SHORTEN_TABLE)
def test_shorten_name_as_flux(name, expected):
    assert flux.shorten_name(name) == expected
    assert len(flux.shorten_name(name)) <= 53


@given(st.text(alphabet=string.ascii_lowercase + string.digits + "-.", max_size=120))
def test_property_shorten_name_fits_and_keeps_short_names(name):
    short = flux.shorten_name(name)
    assert len(short) <= 53
    if len(name) <= 53:
        assert short == name
    else:  # 40 characters of the name, a dash, 12 hex digits of its SHA-256
        assert short == name[:40] + "-" + hashlib.sha256(name.encode()).hexdigest()[:12]


@pytest.mark.parametrize("spec, identity", [
    ({}, ("tenant-a", "tenant-root")),
    ({"targetNamespace": "tenant-x"}, ("tenant-x-tenant-a", "tenant-x")),
    ({"releaseName": "r", "targetNamespace": "tenant-x"}, ("r", "tenant-x")),
    ({"targetNamespace": "t" * 60}, (flux.shorten_name("t" * 60 + "-tenant-a"), "t" * 60)),
])
def test_release_identity_as_flux(spec, identity):
    """GetReleaseName / GetReleaseNamespace of helm-controller's api/v2, shortened."""
    release = {"metadata": {"name": "tenant-a", "namespace": "tenant-root"}, "spec": spec}
    assert flux.release_identity(release) == identity


def test_long_release_names_are_compared_shortened(tmp_path):
    long_ns = "tenant-" + "x" * 50
    text = hr("tenant-a", spec=f"  targetNamespace: {long_ns}\n  interval: 5m\n")
    release = flux.load_helmrelease_text(text)
    short = flux.shorten_name(f"{long_ns}-tenant-a")
    flux.check_identity(release, short, long_ns)
    with pytest.raises(flux.FluxError, match="installs release"):
        flux.check_identity(release, f"{long_ns}-tenant-a", long_ns)


# ---------------------------------------------------------------- selection

def test_the_only_helmrelease_is_selected_whatever_its_name():
    release = flux.load_helmrelease_text("---\n" + hr("a") + "---\nkind: ConfigMap\n", release="b")
    assert release.label() == "tenant-root/a"  # check_identity then says it is not b


def test_text_that_looks_like_a_helmrelease_is_not_one():
    """An attacker's move: a ConfigMap whose data spells a HelmRelease named like the target."""
    decoy = yaml.safe_dump({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "tenant-a"},
                            "data": {"hr": hr("tenant-a")}})
    text = "---\n" + decoy + "---\n" + hr("tenant-a") + "---\n" + hr("tenant-b")
    release = flux.load_helmrelease_text(text, release="tenant-a")
    assert release.where.number == 2 and release.release["kind"] == "HelmRelease"


def test_a_key_twice_anywhere_in_the_file_refuses_the_file():
    """Issue 19 item 1: kustomize (go-yaml v3) refuses the whole file, so does
    cozyrender, whichever release is selected."""
    text = "---\n" + hr("tenant-a") + "---\n" + hr("tenant-b", spec="  x: 1\n  x: 2\n")
    for release in ("tenant-a", "tenant-b"):
        with pytest.raises(flux.FluxError, match="document 2 is not YAML: line 17, column 3: duplicate key 'x'"):
            flux.load_helmrelease_text(text, release=release)


def test_a_helmrelease_without_namespace_matches_any_namespace():
    text = "---\n" + hr("tenant-a").replace("  namespace: tenant-root\n", "") + "---\n" + hr("b")
    assert flux.load_helmrelease_text(text, release="tenant-a", namespace="tenant-root").label() == "tenant-a"


# ---------------------------------------------------------------- the filter's plan

def test_plan_decisions():
    bare = hr("tenant-a")
    plan = flux.plan_entry(flux.load_helmrelease_text(bare), [entry()])
    assert (plan.action, plan.index, plan.entry) == (INSERT, None, entry())
    written = flux.write_entry(flux.load_helmrelease_text(bare), [entry()]).text
    release = flux.load_helmrelease_text(written)
    assert flux.plan_entry(release, [entry()]).action == KEEP
    plan = flux.plan_entry(release, [entry("2")])
    assert (plan.action, plan.index, plan.current) == (REPLACE, 0, entry())
    plan = flux.plan_entry(release, [])
    assert (plan.action, plan.index, plan.entry) == (REMOVE, 0, None)
    assert flux.plan_entry(flux.load_helmrelease_text(bare), []).action == KEEP


def test_plan_keeps_an_entry_that_reads_the_same_in_another_layout():
    """Re-indented by hand (flow style here): the data is the same, so the file is not rewritten."""
    text = hr("tenant-a", spec="  postRenderers: [" + flux.flow(entry()) + "]\n")
    release = flux.load_helmrelease_text(text)
    plan = flux.plan_entry(release, [entry()])
    assert plan.action == KEEP and plan.diff(release.path) == ""
    assert flux.write_entry(release, [entry()]).text == text


def test_plan_warns_when_the_entry_is_not_first():
    user = {"kustomize": {"images": [{"name": "a"}]}}
    text = hr("tenant-a", spec="  postRenderers: [" + flux.flow(user) + ", "
              + flux.flow(entry()) + "]\n")
    release = flux.load_helmrelease_text(text)
    assert flux.plan_entry(release, [entry()]).warnings  # kept, but still said
    plan = flux.plan_entry(release, [entry("2")])
    assert plan.action == REPLACE and plan.index == 1 and "not first" in plan.warnings[0]
    assert not flux.plan_entry(release, []).warnings  # removed: nothing to warn about


def test_plan_diff_names_the_file():
    release = flux.load_helmrelease_text(hr("tenant-a"), "some/file.yaml")
    diff = flux.plan_entry(release, [entry()]).diff(release.path)
    assert diff.startswith("--- some/file.yaml (cozyrender entry)\n+++ from the chart and values now\n")
    assert "+postRenderers:\n" in diff


# ---------------------------------------------------------------- the stream, byte for byte

_TEXT = st.text(alphabet=string.ascii_letters + string.digits + " -:#'\"\n\t.{}[]|>&*!%@`", max_size=40)
_OTHER = st.builds(
    lambda name, data, flow: yaml.safe_dump(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data},
        default_flow_style=flow, sort_keys=False, width=30),
    st.sampled_from(["tenant-a", "cm", "x"]), st.dictionaries(st.sampled_from(["a", "b", "k"]), _TEXT,
                                                               max_size=3),
    st.sampled_from([False, None]))
_SEPARATOR = st.sampled_from(["---\n", "--- # marker comment\n", "---   \n", "%YAML 1.1\n---\n"])
_TRAILER = st.sampled_from(["", "# trailing comment\n", "...\n", "\n\n", "# c\n...\n"])


@settings(max_examples=60, deadline=None)
@given(before=st.lists(st.tuples(_SEPARATOR, _OTHER, _TRAILER), max_size=3),
       after=st.lists(st.tuples(_SEPARATOR, _OTHER, _TRAILER), max_size=3),
       decoys=st.lists(st.sampled_from(["tenant-b", "tenant-c"]), unique=True),
       head=st.sampled_from(["", "# head comment\n"]), crlf=st.booleans(), value=st.sampled_from(["1", "2"]))
def test_property_editing_one_helmrelease_keeps_every_other_byte(before, after, decoys, head, crlf, value):
    """Whatever documents surround the HelmRelease (comments, `...`, directives,
    other HelmReleases, ConfigMaps named like it), the edit changes its document
    only, every other byte of the file is as read, and the result reads back."""
    parts = [head]
    parts += [sep + doc + trailer for sep, doc, trailer in before]
    parts.append("---\n" + hr("tenant-a"))
    parts += ["---\n" + hr(name) for name in decoys]
    parts += [sep + doc + trailer for sep, doc, trailer in after]
    text = "".join(parts)
    if crlf:
        text = text.replace("\n", "\r\n")
    release = flux.load_helmrelease_text(text, release="tenant-a")
    written = flux.write_entry(release, [entry(value)]).text
    assert written[:release.start] == text[:release.start]
    assert written.endswith(text[release.end:])
    stream, out = flux.read_text(text, "x"), flux.read_text(written, "x")
    assert len(stream.documents) == len(out.documents)
    for a, b in zip(stream.documents, out.documents):
        if a.number != release.where.number:
            assert stream.text_of(a) == out.text_of(b)
    again = flux.load_helmrelease_text(written, release="tenant-a")
    assert again.owned() == (0, entry(value))
    # removable: the list left empty says so, nothing else changes
    newline = "\r\n" if crlf else "\n"
    document = text[release.start:release.end] + "  postRenderers: []" + newline
    assert flux.write_entry(again, []).text == text[:release.start] + document + text[release.end:]


def test_stream_reader_writer_round_trip():
    text = "# head\n%YAML 1.1\n---\na: 1\n...\n--- # c\nb: [\n---\nc: 3"
    stream = flux.read_text(text, "x")
    assert "".join(stream.text_of(d) for d in stream.documents) == text
    assert [d.number for d in stream.documents] == list(range(1, len(stream.documents) + 1))
    last = stream.documents[-1]
    assert stream.write(last, "c: 4\n") == text[:last.start] + "c: 4\n"
