"""`--helmrelease` edits the HelmRelease as text: every byte outside
cozyrender's own entry stays, whatever the file's indentation, comments,
spacing, flow style or line breaks. Expected files are spelled out, or the
written file with the owned entry cut out is compared with the original."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from cozyrender import flux
from cozyrender.commands.flux import command
from cozyrender.postrender.yamledit import Editor, child

ROOT = Path(__file__).resolve().parent.parent
TENANT = ROOT / "charts" / "tenant"
CHART_ARGS = ["tenant-a", str(TENANT), "-n", "tenant-root"]


def entry(value: str = "1", kinds: tuple[str, ...] = ("Namespace",)) -> dict:
    """An owned entry (what `derive` gives), small enough to spell out."""
    patches = [{"target": {"kind": kind, "name": "tenant-a"},
                "patch": f"- op: add\n  path: /metadata/labels/x\n  value: '{value}'\n"}
               for kind in kinds]
    patches[0]["patch"] = flux.MARKER + "\n" + patches[0]["patch"]
    return {"kustomize": {"patches": patches}}


def write(text: str, new: dict | None) -> str:
    return flux.write_entry(flux.load_helmrelease_text(text), [new] if new else []).text


def cut_owned(text: str) -> str:
    """The file with the lines of cozyrender's (block) entry removed."""
    hr = flux.load_helmrelease_text(text)
    owned = hr.owned()
    if owned is None:
        return text
    sequence = child(hr.root, "spec", "postRenderers")
    start, end = Editor(hr.document).item_span(sequence, owned[0])
    return text[:hr.start + start] + text[hr.start + end:]


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(command, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.stdout, result.stderr


HEAD4 = """\
apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata:
    name: tenant-a
    namespace: tenant-root
spec:
    interval: 5m   
    chart:
        spec:
            chart: ./charts/tenant
            sourceRef:
                kind: GitRepository
                name: cozyrender
    values:
        resourceQuotas:
            gpuclass.cozystack.io/devices: 1
"""

# The reviewer's file: 4-space mappings, sequences not indented beyond their key.
FOUR_SPACES = HEAD4 + """\
    postRenderers:
    # user first
    - kustomize:
          images:
          - name: nginx
            newTag: "1.2"   # keep me
    # user second
    - kustomize:
          patches:
          - target: {kind: Namespace, name: tenant-a}
            patch: |
                - op: add
                  path: /metadata/labels/y
                  value: z

    # trailing comment
"""

OWNED_FOUR_SPACES = """\
    - kustomize:
          patches:
          - target:
                kind: Namespace
                name: tenant-a
            patch: |
                # cozyrender flux: generated from the chart and values; regenerate, do not edit
                - op: add
                  path: /metadata/labels/x
                  value: '1'
"""


def test_four_space_indentation_with_unindented_sequences():
    written = write(FOUR_SPACES, entry())
    assert written == FOUR_SPACES.replace("    postRenderers:\n",
                                          "    postRenderers:\n" + OWNED_FOUR_SPACES)
    assert '            newTag: "1.2"   # keep me\n' in written
    assert "    # user first\n    - kustomize:\n          images:" in written
    assert yaml.safe_load(written)["spec"]["postRenderers"][0] == entry()
    assert write(written, entry()) == written  # idempotent
    assert write(written, None) == FOUR_SPACES  # and removable


INDENTED = """\
# a comment before the document
---
apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata:
  name: tenant-a   # trailing spaces and comments keep their spacing    
  namespace: tenant-root
spec:
  interval: 5m
  values: {resourceQuotas: {gpuclass.cozystack.io/devices: 1}}
  postRenderers:   # applied in order
    # ours comes first
    - kustomize:
        images:
          - name: a    # image a
            newTag: "1"
      # a comment inside the first user entry, after its content

    # cozyrender's entry, moved here by hand
    - kustomize:
        patches:
          - target:
              kind: Namespace
              name: tenant-a
            patch: |
              # cozyrender flux: generated from the chart and values; regenerate, do not edit
              - op: add
                path: /metadata/labels/x
                value: 'old'
    # third: after the owned entry
    - kustomize:
        patches:
          - patch: |-
              - op: add
                path: /metadata/labels/z
                value: "3"
            target:
              kind: Namespace
              name: tenant-a
# a comment after the HelmRelease
---
apiVersion: v1
kind: ConfigMap
metadata: {name: other}
"""


def test_replacement_in_the_middle_keeps_every_other_byte():
    hr = flux.load_helmrelease_text(INDENTED)
    assert hr.owned()[0] == 1
    result = flux.write_entry(hr, [entry("new", ("Namespace", "ResourceQuota"))])
    assert any("not first" in w for w in result.warnings)
    written = result.text
    assert written != INDENTED
    assert cut_owned(written) == cut_owned(INDENTED)
    assert "    # cozyrender's entry, moved here by hand\n    - kustomize:\n" in written
    assert "\n          - target:\n              kind: ResourceQuota\n              name: tenant-a\n" in written
    release = flux.load_helmrelease_text(written)
    assert release.owned() == (1, entry("new", ("Namespace", "ResourceQuota")))
    assert write(written, entry("new", ("Namespace", "ResourceQuota"))) == written


def test_removal_keeps_the_comments_around_the_entry():
    written = write(INDENTED, None)
    assert written == cut_owned(INDENTED)
    assert "      # a comment inside the first user entry, after its content\n\n" \
           "    # cozyrender's entry, moved here by hand\n    # third: after the owned entry\n" \
           in written
    assert [flux.is_owned(e) for e in flux.load_helmrelease_text(written).post_renderers()] \
        == [False, False]


def test_insertion_keeps_the_comment_above_the_first_user_entry():
    bare = write(INDENTED, None)
    written = write(bare, entry())
    assert cut_owned(written) == bare
    assert "  postRenderers:   # applied in order\n    - kustomize:\n        patches:\n" in written
    assert "    # ours comes first\n    - kustomize:\n        images:\n" in written


def test_insertion_when_post_renderers_is_absent():
    """`postRenderers:` goes after the last line of spec's content, at its keys'
    column; no sequence in the document: sequences indented like mappings."""
    original = HEAD4 + "    # the end of spec\nstatus:\n    observedGeneration: 1\n"
    written = write(original, entry())
    assert written == HEAD4 + (
        "    postRenderers:\n"
        "        - kustomize:\n"
        "              patches:\n"
        "                  - target:\n"
        "                        kind: Namespace\n"
        "                        name: tenant-a\n"
        "                    patch: |\n"
        f"                        {flux.MARKER}\n"
        "                        - op: add\n"
        "                          path: /metadata/labels/x\n"
        "                          value: '1'\n"
    ) + "    # the end of spec\nstatus:\n    observedGeneration: 1\n"
    assert write(written, entry()) == written


def test_insertion_uses_the_files_sequence_indentation():
    """No postRenderers and no item to copy: the sequence style comes from
    another block sequence of the document (here: indented by 4, dash + 3)."""
    original = ("apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nspec:\n"
                "    valuesFrom:\n        -   kind: Secret\n            name: v\n")
    written = write(original, entry())
    assert written == original + (
        "    postRenderers:\n"
        "        -   kustomize:\n"
        "                patches:\n"
        "                    -   target:\n"
        "                            kind: Namespace\n"
        "                            name: tenant-a\n"
        "                        patch: |\n"
        f"                            {flux.MARKER}\n"
        "                            - op: add\n"
        "                              path: /metadata/labels/x\n"
        "                              value: '1'\n")
    assert yaml.safe_load(written)["spec"]["postRenderers"] == [entry()]


@pytest.mark.parametrize("value, block", [
    ("[]   # none yet", "  postRenderers:   # none yet\n"),
    ("", "  postRenderers:\n"),
    ("null", "  postRenderers:\n"),
])
def test_empty_post_renderers_becomes_a_block_list(value, block):
    original = ("apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nspec:\n"
                f"  postRenderers: {value}".rstrip(" ") + "\n  interval: 5m\n")
    written = write(original, entry())
    owned = "".join("  " + line for line in
                    flux.format_post_renderers([entry()]).splitlines(keepends=True)[1:])
    assert written == ("apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nspec:\n"
                       + block + owned + "  interval: 5m\n")
    assert write(written, entry()) == written
    emptied = write(written, None)
    assert yaml.safe_load(emptied)["spec"]["postRenderers"] == []
    if value.startswith("[]"):
        assert emptied == original


def test_flow_post_renderers_stay_flow():
    original = ("apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nspec:\n"
                "  postRenderers: [{kustomize: {images: [{name: a}]}}]  # ours\n")
    written = write(original, entry())
    assert written == original.replace("[{kustomize", "[" + flux.flow(entry()) + ", {kustomize")
    assert yaml.safe_load(written)["spec"]["postRenderers"][0] == entry()
    replaced = write(written, entry("2"))
    assert replaced == original.replace("[{kustomize", "[" + flux.flow(entry("2")) + ", {kustomize")
    assert write(replaced, None) == original


def test_flow_spec():
    original = "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nspec: {interval: 5m}\n"
    written = write(original, entry())
    assert written == original.replace("5m}", "5m, postRenderers: [" + flux.flow(entry()) + "]}")
    assert write(written, entry()) == written


def test_crlf_file_keeps_crlf(tmp_path):
    original = FOUR_SPACES.replace("\n", "\r\n")
    written = write(original, entry())
    assert written == original.replace(
        "    postRenderers:\r\n", "    postRenderers:\r\n" + OWNED_FOUR_SPACES.replace("\n", "\r\n"))
    assert cut_owned(written) == original
    # through the command: read and written as bytes, no line-break translation
    path = tmp_path / "hr.yaml"
    path.write_bytes(original.encode())
    code, _, _ = run(*CHART_ARGS, "--helmrelease", str(path))
    assert code == 0
    data = path.read_bytes()
    assert data.count(b"\n") == data.count(b"\r\n")
    assert cut_owned(data.decode()) == original
    assert run(*CHART_ARGS, "--helmrelease", str(path), "--check")[0] == 0
    code, _, err = run(*CHART_ARGS, "--helmrelease", str(path))
    assert code == 0 and "already up to date" in err
    assert path.read_bytes() == data


def test_file_without_final_line_break():
    original = "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nspec:\n  interval: 5m"
    written = write(original, entry())
    assert written.startswith(original + "\n  postRenderers:\n    - kustomize:\n")
    assert yaml.safe_load(written)["spec"]["postRenderers"] == [entry()]


def test_command_writes_the_reviewers_file_keeping_user_bytes(tmp_path):
    """The real chart, through the CLI: insert, in sync, then idempotent."""
    path = tmp_path / "hr.yaml"
    path.write_text(FOUR_SPACES)
    code, _, err = run(*CHART_ARGS, "--helmrelease", str(path))
    assert code == 0 and "warning" not in err
    written = path.read_text()
    assert cut_owned(written) == FOUR_SPACES
    owned = flux.load_helmrelease(path).owned()
    assert owned[0] == 0
    assert [p["target"]["kind"] for p in owned[1]["kustomize"]["patches"]] == [
        "Secret", "ResourceQuota", "LimitRange", "Namespace", "ResourceQuota", "ResourceQuota"]
    assert run(*CHART_ARGS, "--helmrelease", str(path), "--check")[0] == 0
    code, _, err = run(*CHART_ARGS, "--helmrelease", str(path))
    assert code == 0 and "already up to date" in err and path.read_text() == written


# ---------------------------------------------------------------- refused files

HR = "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n  name: tenant-a\n"


@pytest.mark.parametrize("spec, message", [
    ("spec:\n  interval: 5m\n  interval: 10m\n", "line 7, column 3: duplicate key 'interval' (first at line 6)"),
    ("spec:\n  values:\n    a: 1\n    a: 2\n", "duplicate key 'a'"),
    ("spec:\n  postRenderers: [5, {kustomize: 3}]\n", "spec.postRenderers[0] is not a mapping"),
    ("spec:\n  postRenderers:\n    - kustomize: 3\n", "spec.postRenderers[0].kustomize is not a mapping"),
    ("spec:\n  postRenderers:\n    - {}\n    - kustomize: [1]\n",
     "spec.postRenderers[1].kustomize is not a mapping"),
    ("spec:\n  postRenderers:\n    - kustomize:\n        patches: {a: 1}\n",
     "spec.postRenderers[0].kustomize.patches is not a list"),
    ("spec:\n  postRenderers:\n    - kustomize:\n        patches: [x]\n",
     "spec.postRenderers[0].kustomize.patches[0] is not a mapping"),
    ("x: &pr\n  - kustomize: {images: []}\nspec:\n  postRenderers: *pr\n", "YAML alias"),
    ("base: &base\n  postRenderers: []\nspec:\n  <<: *base\n  interval: 5m\n", "merge key"),
])
def test_refused_helmrelease_exit_2(tmp_path, spec, message):
    path = tmp_path / "hr.yaml"
    path.write_text(HR + spec)
    code, out, err = run(*CHART_ARGS, "--helmrelease", str(path))
    assert code == 2 and out == ""
    assert message in err and str(path) in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1, err
    assert path.read_text() == HR + spec


def _layout_file(m: int, s: int, o: int, crlf: bool) -> str:
    """A HelmRelease in one indentation style, with comments between and inside entries."""
    def at(level_columns: int, text: str) -> str:
        return " " * level_columns + text + "\n"
    dash = m + s
    item = dash + o
    text = ("apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nspec:\n"
            + at(m, "interval: 5m  # every five minutes")
            + at(m, "postRenderers:")
            + at(dash, "# first user entry")
            + at(dash, "-" + " " * (o - 1) + "kustomize:")
            + at(item + m, "images:")
            + at(item + m + s, "-" + " " * (o - 1) + "name: a")
            + at(item + m + s + o, "newTag: 'x'    # spaced comment")
            + at(item, "# inside, after the content")
            + "\n"
            + at(dash, "-" + " " * (o - 1) + "kustomize: {images: []}")
            + "# at column 0\n"
            + at(m, "values:")
            + at(2 * m, "a: 1"))
    return text.replace("\n", "\r\n") if crlf else text


@pytest.mark.parametrize("m", [2, 3, 4])
@pytest.mark.parametrize("s", ["indentless", "indented"])
@pytest.mark.parametrize("o", [2, 4])
@pytest.mark.parametrize("crlf", [False, True])
def test_layouts_insert_replace_remove(m, s, o, crlf):
    original = _layout_file(m, 0 if s == "indentless" else m, o, crlf)
    inserted = write(original, entry())
    assert cut_owned(inserted) == original
    hr = flux.load_helmrelease_text(inserted)
    assert hr.post_renderers()[0] == entry() and len(hr.post_renderers()) == 3
    # the new entry sits at the column of the file's own items
    dash_column = m + (0 if s == "indentless" else m)
    newline = "\r\n" if crlf else "\n"
    assert f"postRenderers:{newline}{' ' * dash_column}-{' ' * (o - 1)}kustomize:{newline}" in inserted
    replaced = write(inserted, entry("2", ("Namespace", "Secret")))
    assert cut_owned(replaced) == original
    assert write(replaced, entry("2", ("Namespace", "Secret"))) == replaced
    assert write(replaced, None) == original


def test_a_directive_stays_with_its_document():
    text = "%YAML 1.1\n---\napiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n  name: tenant-a\n" \
           "  namespace: tenant-root\nspec:\n  interval: 5m\n"
    written = write(text, entry())
    assert written.startswith(text)
    assert cut_owned(written).startswith("%YAML 1.1\n---\n")
    assert yaml.safe_load(written)["spec"]["postRenderers"] == [entry()]
