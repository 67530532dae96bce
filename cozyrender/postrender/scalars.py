"""Spelling values as YAML text, exactly: the scalars and small collections
the rules write (`flow_value`, `quote`), block-mapping entries, and literal
blocks (`literal_block`, `literal_safe`). Each function's output reads back
as the value it was given. Pure text, no I/O; `yamledit` places the text.
"""

from __future__ import annotations

from yaml.nodes import ScalarNode

Value = str | bool | int | float | list | dict | None


def flow_value(value: Value) -> str:
    """A value as one flow node (valid in block context too): strings
    double-quoted, other scalars as PyYAML's safe dumper spells them."""
    if isinstance(value, str):
        return quote(value)
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _float(value)
    if isinstance(value, dict):
        return "{" + ", ".join(f"{flow_value(k)}: {flow_value(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(flow_value(v) for v in value) + "]"
    raise TypeError(f"no flow spelling for {type(value).__name__}")


def _float(value: float) -> str:
    """A float as PyYAML's SafeRepresenter.represent_float spells it."""
    text = repr(value).lower()
    if text in ("nan", "inf", "-inf"):
        return {"nan": ".nan", "inf": ".inf", "-inf": "-.inf"}[text]
    if "." not in text and "e" in text:
        text = text.replace("e", ".0e", 1)  # 1e17 is no YAML float; 1.0e+17 is
    return text


# Characters a YAML double-quoted scalar must escape (json would do, at an
# import cost on Helm's hot path).
_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\t": "\\t", "\r": "\\r"}


def _special(ch: str) -> bool:
    """A character YAML text cannot hold as itself: a control character
    (C0, DEL, C1, NEL among them), a surrogate, a line or paragraph separator,
    a byte order mark or a non-character; quote escapes it."""
    return (ch < " " or "\x7f" <= ch <= "\x9f" or "\ud800" <= ch <= "\udfff"
            or ch in "\u2028\u2029\ufeff\ufffe\uffff")


def quote(text: str) -> str:
    """`text` as a YAML double-quoted scalar, exactly."""
    out = []
    for ch in text:
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif ch < " " or (ch >= "\x7f" and _special(ch)):  # no call for the common characters
            out.append(f"\\x{ord(ch):02x}" if ord(ch) < 0x100 else f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _block_entry(key: str, value: Value, indent: int) -> str:
    pad = " " * indent
    if isinstance(value, dict):
        lines = "".join(_block_entry(k, v, indent + 2) for k, v in value.items())
        return f"{pad}{key}:\n{lines}"
    return f"{pad}{key}: {flow_value(value)}\n"


def format_string_scalar(node: ScalarNode, text: str, new_value: str) -> str:
    """A string scalar spelled in the style of the one it replaces: a literal
    block stays a literal block at its indentation; anything else becomes a
    double-quoted string, which holds every value exactly."""
    if node.style == "|" and literal_safe(new_value):
        return literal_block(new_value, _literal_indent(node, text), _header_comment(node, text))
    return quote(new_value)


def literal_block(value: str, indent: int, header_comment: str = "") -> str:
    """`value` as a literal block scalar: the `|` header (its chomping indicator
    chosen for the trailing line breaks, then `header_comment` as given), the
    lines indented by `indent` spaces (empty lines stay empty), ending with a
    line break. Exact only for a `literal_safe` value."""
    body = value.rstrip("\n")
    trailing = len(value) - len(body)
    chomp = "-" if trailing == 0 else ("" if trailing == 1 else "+")
    lines = [(" " * indent + line) if line else "" for line in body.split("\n")]
    return f"|{chomp}{header_comment}\n" + "\n".join(lines) + "\n" * max(trailing, 1)


def _header_comment(node: ScalarNode, text: str) -> str:
    """A comment on a block scalar's header line (`|  # why`), kept as written."""
    header_end = text.find("\n", node.start_mark.index)
    header = text[node.start_mark.index:header_end if header_end >= 0 else len(text)].rstrip("\r")
    at = header.find("#")
    if at < 0:
        return ""
    return header[len(header[:at].rstrip()):]


def literal_safe(value: str) -> bool:
    """Whether `value` reads back exactly from a literal block: some content,
    no leading blank on its first line (it would set the indentation), no
    line of only blanks but the last (it would read back as an empty one), no
    character a literal block cannot hold or reads as a line break."""
    if not value.strip() or value.lstrip("\n").startswith((" ", "\t")):
        return False
    if any(line != line.rstrip(" \t") and not line.strip() for line in value.split("\n")[:-1]):
        return False
    return all(ch in "\n\t" or not _special(ch) for ch in value)


def _literal_indent(node: ScalarNode, text: str) -> int:
    header_end = text.find("\n", node.start_mark.index)
    for line in text[header_end + 1:node.end_mark.index].split("\n"):
        if line.strip():
            return len(line) - len(line.lstrip(" "))
    return node.start_mark.column + 2
