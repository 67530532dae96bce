"""Reading and writing the stream: the kio reader/writer of the pipeline.

The input is split into chunks at `---` lines in column 0 (a document marker
in YAML wherever it stands, block scalars included) and after `...` lines.
Each chunk holds at most one document, with its separator and comments, so
writing the chunks back unchanged reproduces the input byte for byte.
Sniffing decides which chunks a rule may need; only those become node trees.
"""

from __future__ import annotations

import re

_BOUNDARY = re.compile(rb"^---(?=[ \t\r\n]|$)|^\.\.\.(?:[ \t][^\n]*)?(?:\r?\n|$)", re.M)

# Kinds some rule reads. A chunk that mentions none of them, defines no
# anchor and starts like a mapping is passed through unparsed.
_RULE_KINDS = (b"Namespace", b"ResourceQuota", b"LimitRange", b"Secret", b"List")
_SOURCE_COMMENT = re.compile(rb"^# Source: (.+?)\r?$", re.M)
_FILENAME_ANNOTATION = re.compile(rb"postrenderer\.helm\.sh/postrender-filename\W+([^\s'\",}]+)")


class Chunk:
    """Bytes [start, end) of the input; `number` is its 1-based position."""

    __slots__ = ("number", "start", "end")

    def __init__(self, number: int, start: int, end: int) -> None:
        self.number, self.start, self.end = number, start, end


def split_chunks(data: bytes) -> list[Chunk]:
    cuts = [0]
    for match in _BOUNDARY.finditer(data):
        if match.group().startswith(b"-"):
            cut = match.start()
            while cut > cuts[-1] and _line_before(data, cut).startswith(b"%"):
                cut -= len(_line_before(data, cut))  # a directive belongs to the document it precedes
        else:
            cut = match.end()
        if cut != cuts[-1]:
            cuts.append(cut)
    if cuts[-1] != len(data):
        cuts.append(len(data))
    return [Chunk(number, start, end) for number, (start, end) in enumerate(zip(cuts, cuts[1:]), 1)]


def _line_before(data: bytes, pos: int) -> bytes:
    """The whole line ending just before `pos` (its line break included)."""
    return data[data.rfind(b"\n", 0, pos - 1) + 1:pos]


def mentions_rule_kind(data: bytes, chunk: Chunk) -> bool:
    """Whether a rule may need this chunk: it names a kind some rule reads,
    or has a backslash (an escape in a double-quoted scalar could spell a kind
    without its bytes). A cheap test; a false positive costs only a parse."""
    start, end = chunk.start, chunk.end
    return data.find(b"\\", start, end) >= 0 or any(data.find(kind, start, end) >= 0 for kind in _RULE_KINDS)


def source_of(data: bytes, chunk: Chunk) -> str | None:
    """The `# Source:` path (Helm 3) or postrender-filename (Helm 4) of a chunk."""
    for pattern in (_SOURCE_COMMENT, _FILENAME_ANNOTATION):
        match = pattern.search(data, chunk.start, chunk.end)
        if match:
            return match.group(1).decode("utf-8", "replace")
    return None
