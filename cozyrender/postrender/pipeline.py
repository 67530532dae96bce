"""The post-render pipeline: read the stream, run the filters, write it.

    read      split into chunks (stream), parse only those a rule may need
    filter    ResourceQuota budget keys, LimitRanges of GPU-only tenants,
              the tenant Namespace's vGPU label, the values Secret
    verify    each edited document parsed again: the original with exactly
              the intended changes, or one error line and no output (`verify`)
    write     untouched chunks byte for byte, edited ones with their edits

Decisions come from `rules`; text edits from `yamledit`.
"""

from __future__ import annotations

from cozyrender.postrender.document import Document, kube_objects, read_document
from cozyrender.postrender.errors import EditError, PostRenderError
from cozyrender.postrender.filters import Facts, commit_list_drops, edit, gather, needs_edit
from cozyrender.postrender.stream import BOM, Chunk, source_of, split_chunks
from cozyrender.postrender.syntax import SyntaxProblem, check_chunk


class PostRenderResult:
    """The post-rendered stream, and warnings for stderr."""

    __slots__ = ("output", "warnings")

    def __init__(self, output: bytes, warnings: list[str]) -> None:
        self.output, self.warnings = output, warnings


def post_render(data: bytes) -> PostRenderResult:
    """Post-render a Helm release stream; raise PostRenderError on bad input."""
    chunks, plan, warnings = plan_output(data)
    return PostRenderResult(b"".join(output_pieces(data, chunks, plan)), warnings)


def plan_output(data: bytes) -> tuple[list[Chunk], list[int | bytes], list[str]]:
    """Everything that can fail, done before a byte is written: the output as
    a plan of input chunks to copy (their index) and edited chunks (bytes).

    Two passes keep memory flat on large streams: the first reads the facts
    the rules need (entitlements, which quotas are dropped), the second parses
    again only the chunks a rule edits, so no node tree outlives its chunk.
    """
    chunks = split_chunks(data)
    facts = Facts()
    warnings: list[str] = []
    waiting: dict[int, list] = {}
    for index, chunk in enumerate(chunks):
        document = read_document(data, chunk)
        if document is not None:
            waits = [wait for obj in kube_objects(document) if (wait := gather(obj, facts, warnings))]
            if waits:
                waiting[index] = waits
    pending = {index for index, waits in waiting.items() if any(needs_edit(wait, facts) for wait in waits)}
    edited: dict[int, Document | None] = {}  # chunk index -> its edited Document, None when dropped
    for index in sorted(pending):
        document = read_document(data, chunks[index], checked=True)
        objects = kube_objects(document)
        try:
            for obj in objects:
                edit(obj, facts)
            commit_list_drops(objects)
        except EditError as err:
            raise document.error(str(err)) from None
        if document.dropped:
            edited[index] = None
        elif document.editor.changed:
            if reason := document.uneditable():
                raise document.error(reason)
            edited[index] = document
    return chunks, _plan(data, chunks, edited), warnings


def _plan(data: bytes, chunks: list[Chunk], edited: dict) -> list[int | bytes]:
    """The output plan, each edited document verified (`Document.verified`)
    in the place it takes in the output. A document that follows a dropped
    one may now follow a `...` line it did not follow before, or open the
    stream: it is checked again there, so a drop never changes how another
    document reads."""
    plan: list[int | bytes] = []
    previous = None  # the input index of the chunk written last
    kept = [index for index in range(len(chunks)) if edited.get(index, True) is not None]
    for position, index in enumerate(kept):
        chunk = chunks[index]
        moved = previous != index - 1
        after_end = previous is not None and chunks[previous + 1].after_end if moved else chunk.after_end
        document = edited.get(index)
        if document is not None:
            try:
                plan.append(document.verified(document.editor.result(), after_end, position == len(kept) - 1))
            except EditError as err:
                raise document.error(str(err)) from None
        else:
            if moved:
                _check_moved(data, chunk, after_end, first=previous is None)
            plan.append(index)
        previous = index
    return plan


def _check_moved(data: bytes, chunk: Chunk, after_end: bool, first: bool) -> None:
    """An untouched chunk whose neighbour was dropped reads as before."""
    raw = data[chunk.start:chunk.end]
    problem = None
    if first and chunk.start > 0 and raw.startswith(BOM):
        problem = "it would open the stream, where its byte order mark reads differently"
    else:
        try:
            check_chunk(raw if chunk.start == 0 or not raw.startswith(BOM) else b" " + raw[3:], after_end)
        except SyntaxProblem as err:
            problem = str(err)
    if problem:
        raise PostRenderError(f"cannot drop the document before this one: {problem}", chunk.number,
                              source_of(data, chunk))


def output_pieces(data: bytes, chunks: list[Chunk], plan: list[int | bytes]):
    """The output, piece by piece: untouched chunks as views of the input."""
    view = memoryview(data)
    for step in plan:
        if isinstance(step, int):
            chunk = chunks[step]
            yield view[chunk.start:chunk.end]
        else:
            yield step
