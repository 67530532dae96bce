"""The post-render pipeline: read the stream, run the filters, write it.

    read      split into chunks (stream), parse only those a rule may need
    filter    ResourceQuota budget keys, LimitRanges of GPU-only tenants,
              the tenant Namespace's vGPU label, the values Secret
    write     untouched chunks byte for byte, edited ones with their edits

Decisions come from `rules`; text edits from `yamledit`.
"""

from __future__ import annotations

from cozyrender.postrender.document import kube_objects, read_document
from cozyrender.postrender.errors import EditError
from cozyrender.postrender.filters import Facts, commit_list_drops, edit, gather, needs_edit
from cozyrender.postrender.stream import Chunk, split_chunks


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
    plan: list[int | bytes] = []
    for index, chunk in enumerate(chunks):
        if index not in pending:
            plan.append(index)
            continue
        document = read_document(data, chunk, checked=True)
        objects = kube_objects(document)
        try:
            for obj in objects:
                edit(obj, facts)
            commit_list_drops(objects)
            if document.dropped:
                continue
            edited = document.editor.result() if document.editor.changed else None
        except EditError as err:
            raise document.error(str(err)) from None
        if edited is not None and (reason := document.uneditable()):
            raise document.error(reason)
        plan.append(index if edited is None else edited.encode("utf-8"))
    return chunks, plan, warnings


def output_pieces(data: bytes, chunks: list[Chunk], plan: list[int | bytes]):
    """The output, piece by piece: untouched chunks as views of the input."""
    view = memoryview(data)
    for step in plan:
        if isinstance(step, int):
            chunk = chunks[step]
            yield view[chunk.start:chunk.end]
        else:
            yield step
