"""The editor: carry out an `EntryPlan` on the HelmRelease's text, and the
pipeline of `--helmrelease` (read the stream, filter, edit, write it).

The HelmRelease is edited as text at the positions PyYAML's composer reports:
only the owned entry's lines change (or the new entry's, or a new
`postRenderers:` key at the end of spec), printed at the indentation the file
uses; every other byte of the document stays, and every other document of the
file is written back as read (`Stream.write`). The result is read back and
compared with what was meant before it is returned: exit 0 means the file says
exactly that.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from cozyrender.flux.errors import FluxError
from cozyrender.flux.filters import INSERT, KEEP, REMOVE, EntryPlan, plan_entry
from cozyrender.flux.helmrelease import HelmReleaseFile, check, walk
from cozyrender.flux.objects import same
from cozyrender.flux.patches import is_owned
from cozyrender.flux.printing import Layout, flow, render_item
from cozyrender.flux.stream import read_text
from cozyrender.postrender.errors import EditError
from cozyrender.postrender.yamledit import Editor, find_entry, is_null


@dataclass
class Written:
    """The whole file after the plan, the plan, and what to tell the user."""

    text: str
    plan: EntryPlan
    warnings: list[str] = field(default_factory=list)


def write_entry(hr: HelmReleaseFile, expected: list[dict]) -> Written:
    """The pipeline for one HelmRelease of a stream: the filter plans, the
    editor edits its document, the writer puts the document back among the
    others, and the result is verified."""
    plan = plan_entry(hr, expected)
    if not plan.changes:
        return Written(hr.text, plan, list(plan.warnings))
    document = apply(hr, plan)
    text = hr.stream.write(hr.where, document)
    _verify(hr, text, plan)
    return Written(text, plan, list(plan.warnings))


def apply(hr: HelmReleaseFile, plan: EntryPlan) -> str:
    """The HelmRelease document's text with the plan carried out."""
    if plan.action == KEEP:
        return hr.document
    editor = Editor(hr.document)
    try:
        _splice(hr, editor, plan)
    except EditError as err:
        raise FluxError(f"{hr.path}: cannot edit spec.postRenderers as text: {err}") from None
    return editor.result()


def _splice(hr: HelmReleaseFile, editor: Editor, plan: EntryPlan) -> None:
    found = find_entry(hr.root, "spec")
    if found is None or not isinstance(found[2], MappingNode):
        raise FluxError(f"{hr.path}: spec comes from a YAML merge key; write it out to let "
                        "cozyrender edit it")
    _, spec_key, spec = found
    shared = _shared(hr.root)
    pr = find_entry(spec, "postRenderers")
    subtree = [spec, *(walk(pr[2]) if pr else ())]
    if any(id(node) in shared for node in subtree):
        raise FluxError(f"{hr.path}: spec or spec.postRenderers is shared through a YAML alias; "
                        "write it out to let cozyrender edit it")
    if pr is None and hr.spec.get("postRenderers") is not None:
        raise FluxError(f"{hr.path}: spec.postRenderers comes from a YAML merge key; write it "
                        "out in spec to let cozyrender edit it")
    layout = _layout(editor, hr.root, spec_key, spec, pr)
    entry = plan.entry

    if pr is None:  # nothing owned to replace or remove: the plan inserts
        if entry is None:
            return
        if spec.flow_style:
            editor.add_flow_entry(spec, f"postRenderers: {flow([entry])}")
            return
        column = spec.value[0][0].start_mark.column
        editor.insert_lines(editor.content_end(spec), " " * column + "postRenderers:\n"
                            + render_item(entry, column + layout.sequence, layout))
        return

    _, key, sequence = pr
    if is_null(sequence) or (isinstance(sequence, SequenceNode) and not sequence.value):
        if entry is None:  # nothing owned in an empty list: nothing to remove
            return
        if spec.flow_style or sequence.start_mark.line != key.start_mark.line:
            if isinstance(sequence, SequenceNode):
                editor.insert_item(sequence, 0, flow(entry), key)
            else:
                editor.replace(sequence.start_mark.index, sequence.end_mark.index, flow([entry]))
            return
        # `postRenderers:`, `postRenderers: null` or `postRenderers: []`, in block: a block list
        editor.replace(editor.colon_after(key) + 1, sequence.end_mark.index, "")
        editor.insert_lines(editor.line_end(sequence.end_mark.index), render_item(
            entry, key.start_mark.column + layout.sequence, layout))
        return
    if not isinstance(sequence, SequenceNode):  # helmrelease.check refused it
        raise FluxError(f"{hr.path}: spec.postRenderers is not a list")

    if sequence.flow_style:
        if plan.action == INSERT:
            editor.insert_item(sequence, 0, flow(entry), key)
        elif plan.action == REMOVE:
            editor.delete_items(sequence, [plan.index], key)
        else:
            editor.replace_item(sequence, plan.index, flow(entry))
        return
    if plan.action == INSERT:
        dash, content = editor.item_columns(sequence, 0)
        editor.insert_item(sequence, 0, render_item(
            entry, dash, _with_content(layout, content - dash)), key)
        return
    if plan.action == REMOVE:
        editor.replace_item(sequence, plan.index, "")
        if len(sequence.value) == 1:  # the list is left empty: say so
            colon = editor.colon_after(key)
            editor.replace(colon + 1, colon + 1, " []")
        return
    dash, content = editor.item_columns(sequence, plan.index)
    editor.replace_item(sequence, plan.index, render_item(
        entry, dash, _with_content(layout, content - dash)))


def _shared(root: Node) -> set[int]:
    """Nodes reachable on more than one path (anchored and aliased)."""
    counts: dict[int, int] = {}
    stack = [root]
    while stack:
        node = stack.pop()
        counts[id(node)] = counts.get(id(node), 0) + 1
        if counts[id(node)] > 1:
            continue
        if isinstance(node, MappingNode):
            stack.extend(n for pair in node.value for n in pair)
        elif isinstance(node, SequenceNode):
            stack.extend(node.value)
    return {node_id for node_id, count in counts.items() if count > 1}


def _with_content(layout: Layout, content: int) -> Layout:
    return Layout(layout.mapping, layout.sequence, max(content, 2))


def _layout(editor: Editor, root: MappingNode, spec_key: Node, spec: MappingNode,
            pr: tuple[int, ScalarNode, Node] | None) -> Layout:
    """The file's indentation: mappings from spec's keys, sequences from
    spec.postRenderers' items or else the first block sequence of the document."""
    mapping = 2
    if not spec.flow_style and spec.value:
        step = spec.value[0][0].start_mark.column - spec_key.start_mark.column
        if step > 0:
            mapping = step
    candidates: list[tuple[Node, Node]] = [(pr[1], pr[2])] if pr else []
    candidates += [(k, v) for node in walk(root) if isinstance(node, MappingNode)
                   for k, v in node.value]
    sequence, content = mapping, 2
    for key, value in candidates:
        if isinstance(value, SequenceNode) and value.value and not value.flow_style:
            try:
                dash, column = editor.item_columns(value, 0)
            except EditError:
                continue
            if dash >= key.start_mark.column:
                sequence, content = dash - key.start_mark.column, max(column - dash, 2)
                break
    return Layout(mapping, sequence, content)


def _verify(hr: HelmReleaseFile, text: str, plan: EntryPlan) -> None:
    """Read the written file back: the same documents, every other one byte for
    byte, and the same HelmRelease with only cozyrender's entry changed; or an
    error instead of a file that says something else."""
    problem = "the result reads differently"
    try:
        stream = read_text(text, hr.path)
        before, after = hr.stream.documents, stream.documents
        others_kept = len(before) == len(after) and all(
            hr.stream.text_of(a) == stream.text_of(b)
            for a, b in zip(before, after) if a.number != hr.where.number)
        if not others_kept:
            problem = "another document would change"
            raise _Mismatch
        where = after[hr.where.number - 1]
        data = stream.load(where)
        if not isinstance(data, dict):
            raise _Mismatch
        written = check(stream, where, data)
        owned = written.owned()
    except (FluxError, _Mismatch) as err:
        detail = f"({err})" if isinstance(err, FluxError) else f"({problem})"
        raise FluxError(f"{hr.path}: cannot splice the entry into this layout {detail}; "
                        "please report it") from None
    got = [owned[1]] if owned else []
    want = [plan.entry] if plan.entry else []

    def others(release: HelmReleaseFile) -> dict:
        spec = {k: v for k, v in release.spec.items() if k != "postRenderers"}
        entries = [e for e in release.post_renderers() if not is_owned(e)]
        return {**release.release, "spec": spec, "_others": entries}

    if not (same(got, want) and same(others(written), others(hr))):
        raise FluxError(f"{hr.path}: cannot splice the entry into this layout (the result reads "
                        "differently); please report it")


class _Mismatch(Exception):
    pass
