"""The post-render pipeline: read the stream, run the filters, verify, write.

    read      split into chunks (stream), parse only those a rule may need
    filter    ResourceQuota budget keys, LimitRanges of GPU-only tenants,
              the tenant Namespace's vGPU label, the values Secret
    verify    each edited document parsed again: the original with exactly
              the intended changes, or one error line and no output (`verify`)
    write     untouched chunks byte for byte, edited ones with their edits

Decisions come from `rules`; text edits from `yamledit`.
"""

from __future__ import annotations

from cozyrender.gcpause import collector_paused
from cozyrender.postrender.document import Document, KubeObject, kube_objects, read_document
from cozyrender.postrender.errors import EditError, PostRenderError
from cozyrender.postrender.filters import EDIT, Facts, commit_list_drops, edit, gather, needs_edit
from cozyrender.postrender.stream import BOM, Chunk, helm_reading_hazard, source_of, split_chunks
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
    the rules need (entitlements, which quotas are dropped) and edits at once
    the documents whose edits need no other document's facts (a quota, a
    tenant Namespace); the second parses again only the chunks whose edits
    waited for every fact (LimitRanges, values Secrets, Lists), so no node
    tree outlives its chunk and no document is parsed twice to be edited.

    The node trees hold no reference cycles, so the cyclic garbage collector
    is paused meanwhile: on a document of tens of thousands of keys its
    passes over the live trees would cost more than the work itself.
    """
    with collector_paused():
        return _plan_output(data)


def _plan_output(data: bytes) -> tuple[list[Chunk], list[int | bytes], list[str]]:
    chunks = split_chunks(data)
    hazard = helm_reading_hazard(data)
    if hazard:
        at, problem = hazard
        chunk = next(chunk for chunk in chunks if chunk.start <= at < chunk.end)
        line = data.count(b"\n", chunk.start, at) + 1
        raise PostRenderError(f"{problem} (line {line})", chunk.number, source_of(data, chunk))
    facts = Facts()
    warnings: list[str] = []
    waiting: dict[int, list] = {}
    edited: dict[int, bytes | None] = {}  # chunk index -> its verified output, None when dropped
    last = len(chunks) - 1
    for index, chunk in enumerate(chunks):
        document = read_document(data, chunk)
        if document is None:
            continue
        objects = kube_objects(document)
        waits = [wait for obj in objects if (wait := gather(obj, facts, warnings))]
        if not waits:
            continue
        if all(wait is EDIT for wait in waits) and objects[0].parent is None:
            _edit_document(document, objects, facts, edited, index == last)
        else:
            waiting[index] = waits
    for index, waits in waiting.items():
        if any(needs_edit(wait, facts) for wait in waits):
            document = read_document(data, chunks[index], checked=True)
            _edit_document(document, kube_objects(document), facts, edited, index == last)
    return chunks, _plan(data, chunks, edited), warnings


def _edit_document(document: Document, objects: list[KubeObject], facts: Facts,
                   edited: dict[int, bytes | None], last: bool) -> None:
    """Apply the rules to one document's objects; record its verified output
    (or None when it is dropped) under its chunk's index."""
    index = document.chunk.number - 1
    try:
        for obj in objects:
            edit(obj, facts)
        commit_list_drops(objects)
        if document.dropped:
            edited[index] = None
            return
        if not document.editor.changed:
            return
        if reason := document.uneditable():
            raise EditError(reason)
        edited[index] = document.verified(document.editor.result(), document.chunk.after_end, last)
    except EditError as err:
        raise document.error(str(err)) from None


def _plan(data: bytes, chunks: list[Chunk], edited: dict[int, bytes | None]) -> list[int | bytes]:
    """The output plan. A document that follows a dropped one may now follow
    a `...` line it did not follow before, or open the stream: it is checked
    again there, so a drop never changes how another document reads."""
    plan: list[int | bytes] = []
    previous = -1  # the input index of the chunk written last (-1: none yet)
    for index, chunk in enumerate(chunks):
        output = edited.get(index, index)
        if output is None:
            continue
        if previous != index - 1:
            after_end = previous >= 0 and chunks[previous + 1].after_end
            raw = data[chunk.start:chunk.end] if isinstance(output, int) else output
            _check_moved(data, chunk, raw, after_end, first=previous < 0)
        plan.append(output)
        previous = index
    return plan


def _check_moved(data: bytes, chunk: Chunk, raw: bytes, after_end: bool, first: bool) -> None:
    """A chunk whose neighbour was dropped reads as before in its new place."""
    problem = None
    if first and chunk.start > 0 and raw.startswith(BOM):
        problem = "it would open the stream, where its byte order mark reads differently"
    else:
        try:
            check_chunk(b" " + raw[3:] if chunk.start > 0 and raw.startswith(BOM) else raw, after_end)
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
