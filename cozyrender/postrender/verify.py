"""Every edit is proven before a byte is written.

The rule: an edited document, parsed again, must equal the original
document with exactly the intended changes applied (keys removed, the label
set, values entries set or removed, List items removed) and nothing else. The
filters record each change they make as an `Intent` on the document's model
as well as editing its text; `check_edit` parses the edited text with the
same checks every document gets and compares the two models. A difference is
never written: the post-renderer fails with one line instead. Text edits are
exact by construction; this makes "exit 0 means the output is right" hold
even where that construction has a gap, at the cost of one parse of each
edited document (the untouched ones are never parsed again).

A model is the node tree as values: ("s", tag, text) for a scalar, ("q", tag,
[items]) for a sequence, ("m", tag, {key model: value model}) for a mapping
(unordered, as YAML mappings are). Tags are the resolved ones, so `1`, `"1"`
and `true`, `"true"` differ; scalar text is compared as the parser read it.
Anchors, styles, comments and key order are not content.
"""

from __future__ import annotations

from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from cozyrender.postrender.errors import EditError

_CORE = "tag:yaml.org,2002:"
STR, BOOL, MAP = _CORE + "str", _CORE + "bool", _CORE + "map"


def model(node: Node | None) -> tuple | None:
    """The model of a node tree (None for an empty document)."""
    if node is None:
        return None
    if isinstance(node, ScalarNode):
        return ("s", node.tag, node.value)
    if isinstance(node, SequenceNode):
        return ("q", node.tag, [model(item) for item in node.value])
    entries = {model(key): model(value) for key, value in node.value}
    if len(entries) != len(node.value):
        entries[("duplicate keys",)] = None  # never equal to a model of the original, whose keys are unique
    return ("m", node.tag, entries)


def value_model(value: object) -> tuple:
    """The model of a value as the editor writes it (`yamledit.flow_value`)."""
    if isinstance(value, str):
        return ("s", STR, value)
    if isinstance(value, bool):
        return ("s", BOOL, "true" if value else "false")
    if isinstance(value, dict):
        return ("m", MAP, {value_model(k): value_model(v) for k, v in value.items()})
    raise TypeError(f"no model for {type(value).__name__}")  # the rules write nothing else


Path = tuple  # of str (a string key) and int (a sequence index)


class Intent:
    """The changes a document's edits are meant to make, in order."""

    __slots__ = ("ops",)

    def __init__(self) -> None:
        self.ops: list[tuple] = []

    def remove(self, path: Path, keys) -> None:
        """Entries with these string keys leave the mapping at `path`."""
        self.ops.append(("remove", path, tuple(keys)))

    def set(self, path: Path, key: str, value: object) -> None:
        """The mapping at `path` (made one when `path` is the empty document)
        gets `key` set to `value`, a plain value or a model."""
        self.ops.append(("set", path, key, value if isinstance(value, tuple) else value_model(value)))

    def remove_items(self, path: Path, indices) -> None:
        self.ops.append(("remove_items", path, tuple(indices)))

    def __bool__(self) -> bool:
        return bool(self.ops)


def apply(original: tuple | None, intent: Intent) -> tuple | None:
    """The original model with the intended changes made (it is changed in place)."""
    root = original
    for op in intent.ops:
        kind, path = op[0], op[1]
        if root is None and kind == "set" and not path:
            root = ("m", MAP, {})
        target = _at(root, path)
        if kind == "remove":
            for key in op[2]:
                del _entries(target, "m")[("s", STR, key)]
        elif kind == "set":
            _entries(target, "m")[("s", STR, op[2])] = op[3]
        else:
            items = _entries(target, "q")
            for index in sorted(op[2], reverse=True):
                del items[index]
    return root


def _at(root: tuple | None, path: Path) -> tuple:
    node = root
    for step in path:
        node = _entries(node, "q" if isinstance(step, int) else "m")[step if isinstance(step, int) else ("s", STR, step)]
    return node


def _entries(node: tuple | None, kind: str):
    if node is None or node[0] != kind:
        raise EditError("an intended change does not fit the document")  # a bug in a rule
    return node[2]


def check_edit(original: Node | None, edited: Node | None, intent: Intent) -> None:
    """Raise EditError unless `edited` is `original` with exactly `intent` applied."""
    try:
        expected = apply(model(original), intent)
    except (KeyError, IndexError):
        raise EditError("an intended change does not fit the document") from None
    if model(edited) != expected:
        raise EditError(f"the edited text does not read back as intended ({_first_difference(expected, model(edited))}); "
                        "nothing was written")


def _first_difference(expected: tuple | None, actual: tuple | None, where: str = "") -> str:
    """Where two models first differ, for the error message."""
    here = where or "the document root"
    if expected is None or actual is None or expected[:2] != actual[:2] or expected[0] == "s":
        return f"at {here}"
    if expected[0] == "q":
        if len(expected[2]) != len(actual[2]):
            return f"at {here}: {len(actual[2])} items instead of {len(expected[2])}"
        for index, (a, b) in enumerate(zip(expected[2], actual[2])):
            if a != b:
                return _first_difference(a, b, f"{where}[{index}]")
        return f"at {here}"
    for key, value in expected[2].items():
        name = f"{where}.{key[2]}" if where else str(key[2])
        if key not in actual[2]:
            return f"{name} is missing"
        if actual[2][key] != value:
            return _first_difference(value, actual[2][key], name)
    extra = next((key for key in actual[2] if key not in expected[2]), None)
    return f"{where + '.' if where else ''}{extra[2] if extra else '?'} is unexpected"
