"""Reading and writing the stream: the kio reader/writer of the pipeline.

The input is split into chunks where libyaml's scanner sees document
boundaries: at `---` at the start of a line (a document marker wherever it
stands, block scalars included), after `...` lines, with the `%` directives
(and the comment or blank lines between them and their `---`) kept with the
document they precede, and consecutive `...` lines kept together (libyaml
skips the extra ones). A line starts after LF, CRLF, a lone CR, NEL, LS or
PS, the line breaks libyaml knows. Each chunk holds at most one document,
with its separator and comments, so writing the chunks back unchanged
reproduces the input byte for byte. Sniffing decides which chunks a rule may
need; only those become node trees.
"""

from __future__ import annotations

import re

# Marker candidates come from a plain search (`_candidates`); `_boundaries`
# keeps those at a line start as libyaml sees one (the stream start, or after
# any of its line breaks), followed by a blank, a line break or the end. (A
# lookbehind at every byte would cost more than the rest of the split.)
_BREAK_ENDS = (b"\n", b"\r", b"\xc2\x85", b"\xe2\x80\xa8", b"\xe2\x80\xa9")
_BLANKS_AFTER = (b"", b" ", b"\t", b"\r", b"\n")
_BREAK = rb"(?:\r\n|[\r\n]|\xc2\x85|\xe2\x80[\xa8\xa9])"
# The rest of a `...` line: blanks and a comment, then its line break.
_END_LINE = rb"(?:[ \t]+#(?:(?!" + _BREAK + rb").)*|[ \t]*)(?:" + _BREAK + rb"|\Z)"
# The lines that may stand between a `...` line and the next, or between a
# directive and its `---`: blank (spaces and tabs) or comment lines.
_FILLER = rb"(?:[ \t]*(?:#(?:(?!" + _BREAK + rb").)*)?" + _BREAK + rb")*\Z"
_compiled: dict[bytes, re.Pattern] = {}  # both compiled on the first `...` (most streams have none)

# Kinds some rule reads. A chunk that mentions none of them, defines no
# anchor and starts like a mapping is passed through unparsed.
_RULE_KINDS = (b"Namespace", b"ResourceQuota", b"LimitRange", b"Secret", b"List")
_SOURCE_COMMENT = re.compile(rb"^# Source: (.+?)\r?$", re.M)
_FILENAME_ANNOTATION = re.compile(rb"postrenderer\.helm\.sh/postrender-filename\W+([^\s'\",}]+)")
BOM = b"\xef\xbb\xbf"


class Chunk:
    """Bytes [start, end) of the input; `number` is its 1-based position;
    `after_end` says it follows a `...` line (its document, if any, must then
    start with `---`, as libyaml requires)."""

    __slots__ = ("number", "start", "end", "after_end")

    def __init__(self, number: int, start: int, end: int, after_end: bool = False) -> None:
        self.number, self.start, self.end, self.after_end = number, start, end, after_end


def split_chunks(data: bytes) -> list[Chunk]:
    cuts = [0]
    dots = [False]  # whether each cut follows a `...` line
    for marker, start, cut in _boundaries(data):
        if marker == b"---":
            cut = _directives_start(data, cuts[-1], start)
            if cut != cuts[-1]:
                cuts.append(cut)
                dots.append(False)
            continue
        if dots[-1] and len(cuts) > 1 and _only_filler(data, cuts[-1], start):
            cuts[-1] = cut  # another `...` (comment or blank lines between): the same end
        elif cut != cuts[-1]:
            cuts.append(cut)
            dots.append(True)
    if cuts[-1] != len(data):
        cuts.append(len(data))
        dots.append(False)
    return [Chunk(number, start, end, dots[number - 1])
            for number, (start, end) in enumerate(zip(cuts, cuts[1:]), 1)]


def _only_filler(data: bytes, start: int, end: int) -> bool:
    """Whether data[start:end] is only blank and comment lines."""
    return _pattern(_FILLER).match(data, start, end) is not None


def _pattern(source: bytes) -> re.Pattern:
    if source not in _compiled:
        _compiled[source] = re.compile(source, re.S)
    return _compiled[source]


def _candidates(data: bytes):
    """Each `---` and `...` in order, as a left-to-right search finds them."""
    dash, dot = data.find(b"---"), data.find(b"...")
    while dash >= 0 or dot >= 0:
        if dot < 0 or 0 <= dash < dot:
            yield b"---", dash
            dash = data.find(b"---", dash + 3)
        else:
            yield b"...", dot
            dot = data.find(b"...", dot + 3)


def _boundaries(data: bytes):
    """(marker, its offset, the offset past its line) of each `---` and `...`
    that libyaml reads as a document marker; a `...` line must hold nothing
    but the marker, blanks and a comment (else it is no cut: the chunk then
    fails its check, as the stream does)."""
    for marker, start in _candidates(data):
        if start and not data.endswith(_BREAK_ENDS, 0, start):
            continue
        after = data[start + 3:start + 4]
        if after not in _BLANKS_AFTER and not data.startswith(_BREAK_ENDS[2:], start + 3):
            continue
        if marker == b"---":
            yield marker, start, start
            continue
        line = _pattern(_END_LINE).match(data, start + 3)
        if line:
            yield marker, start, line.end()


def _directives_start(data: bytes, floor: int, marker: int) -> int:
    """Where the document whose `---` is at `marker` starts: before its
    directives, with the blank or comment lines between them and the marker;
    at the marker when it has none. Walks back line by line from the marker."""
    cut = pos = marker
    while pos > floor:
        content_end = pos - 1
        if content_end > floor and data[content_end] == 0x0A and data[content_end - 1] == 0x0D:
            content_end -= 1
        newline = data.rfind(b"\n", floor, content_end)
        start = max(newline, data.rfind(b"\r", max(newline, floor), content_end), floor - 1) + 1
        line = data[start:pos]
        if line.startswith(b"%") or (start == 0 and line.startswith(BOM + b"%")):  # the stream's BOM is no column
            cut = start
        elif line.strip(b" \t\r\n")[:1] not in (b"", b"#"):  # neither blank nor a comment
            break
        pos = start
    return cut


def helm_reading_hazard(data: bytes) -> tuple[int, str] | None:
    """(offset, why) of the first bytes Helm reads otherwise than libyaml,
    which the rules follow: a line that starts with `---` but is no document
    marker (`---#`, `---` and a no-break space), where Kubernetes' YAML reader
    (Helm 3) and kyaml (Helm 4) start a new document that libyaml reads as
    text of this one; and a CR right before a CRLF, which both readers turn
    into one line break (Kubernetes' line reader drops the CRLF and ends the
    line with LF; kyaml rewrites CRLF to LF) where libyaml reads two. Either
    would let Helm apply objects the rules never saw. None when there are none."""
    line = 0 if data.startswith(b"---") else data.find(b"\n---") + 1  # where a `---` line starts; 0: none
    while line or data.startswith(b"---"):
        after = data[line + 3:line + 4]
        if after not in _BLANKS_AFTER and not data.startswith(_BREAK_ENDS[2:], line + 3):
            return line, ("a line starts with '---' but is no document marker; Helm splits documents there "
                          "(a marker is '---' alone or followed by a space)")
        line = data.find(b"\n---", line + 3) + 1
        if not line:
            break
    at = data.find(b"\r\r\n")
    if at >= 0:
        return at, "a CR right before a CRLF line break; Helm reads the two line breaks as one"
    return None


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
