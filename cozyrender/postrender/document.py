"""Reading documents: a chunk of the stream composed into a node tree, and
the Kubernetes objects in it (the document's root, or the items of a List).

Only chunks a rule may need get here; all of them were first checked by
`syntax.check_chunk`.
"""

from __future__ import annotations

import yaml
from yaml.constructor import ConstructorError
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from cozyrender.postrender.errors import EditError, PostRenderError
from cozyrender.postrender.stream import Chunk, mentions_rule_kind, source_of, split_chunks
from cozyrender.postrender.syntax import SyntaxProblem, check_chunk, describe_yaml_error
from cozyrender.postrender.verify import Intent, check_edit
from cozyrender.postrender.yamledit import STR_TAG, Editor, find_entry, is_null
from cozyrender.yamlio import MERGE_TAG, Constructor
from cozyrender.yamlio import SafeLoader as Loader

# Nodes a document may expand to through aliases before it counts as a bomb.
MAX_EXPANDED_NODES = 200_000
# An edit at one place of a shared node would show through its aliases, and
# deleting an anchor would leave its aliases undefined: such documents are
# passed through when no rule changes them, refused when one must.
SHARED_NODES = "aliases and merge keys are not supported in a document cozyrender edits"
_OTHER_BREAKS = ("\x85", "\u2028", "\u2029")
_BREAK_CHARS = ("\n", "\r")


class Document:
    """A parsed chunk: its node tree and the edits made to its text."""

    __slots__ = ("chunk", "source", "editor", "root", "dropped", "shared", "intent", "in_stream_bom", "needs_tree")

    def __init__(self, chunk: Chunk, source: str | None, editor: Editor, root: MappingNode) -> None:
        self.chunk, self.source, self.editor, self.root = chunk, source, editor, root
        self.dropped = False
        self.shared = False  # uses aliases or merge keys
        self.intent = Intent()  # what the edits are meant to change, for `verified`
        self.in_stream_bom = False  # the chunk starts with a BOM after a `...` line (read as a space)
        self.needs_tree = True  # its values must be constructed to be checked (`syntax.check_chunk`)

    def uneditable(self) -> str | None:
        """Why this document's text cannot be edited safely, if it cannot.
        Only a document a rule changes is held to this."""
        if self.shared:
            return SHARED_NODES
        text = self.editor.text
        if ("\r" in text and text.count("\r") != text.count("\r\n")) or any(ch in text for ch in _OTHER_BREAKS):
            return "line breaks other than LF and CRLF (a lone CR, NEL, LS, PS) are not supported in a document cozyrender edits"
        return None

    def verified(self, edited: str, after_end: bool, last: bool) -> bytes:
        """The edited text as output bytes, once it is shown to read back as
        the original with exactly the intended changes (`verify`), in the
        place it takes in the output (after a `...` line or not; the last
        chunk or not). Raises EditError."""
        if self.in_stream_bom:
            if not edited.startswith(" "):
                raise EditError("an edit at the start of a document that begins with a byte order mark")
            output = "\ufeff" + edited[1:]
        else:
            output = edited
        raw = output.encode("utf-8")
        if len(split_chunks(raw)) > 1:
            raise EditError("the edit would start or end a document")
        original = self.editor.prefix + self.editor.text
        if not last and original.endswith(_BREAK_CHARS) and not output.endswith(_BREAK_CHARS):
            raise EditError("the edit would join this document to the next")
        try:
            if after_end:  # the one check a parse alone does not make
                check_chunk(edited.encode("utf-8"), after_end)
            root = compose_text(edited)
        except SyntaxProblem as err:
            raise EditError(f"the edited text does not parse ({err}); nothing was written") from None
        check_edit(self.root, root, self.intent)
        return raw

    def error(self, problem: str) -> PostRenderError:
        return PostRenderError(problem, self.chunk.number, self.source)


class KubeObject:
    """A Kubernetes object: a document's root, or an item of a `kind: List`
    (then `parent` is the `items` sequence, the item's index, the `items` key).
    `path` leads from the document's root to it: () or ("items", index)."""

    __slots__ = ("document", "node", "data", "parent", "dropped", "path", "decision")

    def __init__(self, document: Document, node: MappingNode, data: dict,
                 parent: tuple[SequenceNode, int, Node] | None = None, base: tuple = ()) -> None:
        self.document, self.node, self.data, self.parent = document, node, data, parent
        self.dropped = False
        self.path = () if parent is None else base + ("items", parent[1])
        self.decision = None  # a rule's decision, made once when the facts are gathered

    @property
    def kind(self) -> object:
        return self.data.get("kind")

    @property
    def metadata(self) -> dict:
        metadata = self.data.get("metadata")
        return metadata if isinstance(metadata, dict) else {}

    @property
    def namespace(self) -> object:
        return self.metadata.get("namespace")

    @property
    def label(self) -> str:
        name = self.metadata.get("name")
        namespace = self.namespace
        return f"{self.kind} {namespace}/{name}" if namespace else f"{self.kind} {name}"


def read_document(data: bytes, chunk: Chunk, checked: bool = False) -> Document | None:
    """Check a chunk (every chunk: UTF-8, well-formed, one mapping document)
    and compose it into a node tree when a rule may need it."""
    raw = data[chunk.start:chunk.end]
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise PostRenderError(
            f"not UTF-8 (byte {err.object[err.start]:#04x} at offset {chunk.start + err.start})",
            chunk.number,
            source_of(data, chunk),
        ) from None
    original = text
    view = in_stream_view(text, chunk.start)
    if view is not text:
        text, raw = view, view.encode("utf-8")
    needs_tree = True
    if not checked:
        try:
            needs_tree = check_chunk(raw, chunk.after_end)
        except SyntaxProblem as err:
            raise PostRenderError(str(err), chunk.number, source_of(data, chunk)) from None
        if not (needs_tree or mentions_rule_kind(data, chunk)):
            return None
    source = source_of(data, chunk)
    try:
        root, shared = compose_checked(text, checked=True)
    except SyntaxProblem as err:
        raise PostRenderError(str(err), chunk.number, source) from None
    if root is None:
        return None  # empty, or comments only
    document = Document(chunk, source, Editor(text), root)
    document.shared = shared
    document.in_stream_bom = view is not original
    document.needs_tree = checked or needs_tree
    return document


def in_stream_view(text: str, start: int) -> str:
    """The text of a chunk as libyaml reads it inside the stream. A byte
    order mark at the stream's start is the encoding's signature (the Editor
    holds it apart); one that starts a later chunk (after a `...` line) is
    skipped as one column of blank, so it is read as a space: same offsets,
    same columns, same verdict as in the whole stream."""
    if start > 0 and text.startswith("\ufeff"):
        return " " + text[1:]
    return text


def compose_checked(text: str, checked: bool = False) -> tuple[Node | None, bool]:
    """One YAML document composed after the checks every chunk gets (unless
    `checked` says they ran): (its root, None when empty; whether it uses
    aliases or merge keys). A leading byte order mark is not part of the
    document (marks count from after it, as the Editor does). Raises SyntaxProblem."""
    if not checked:
        check_chunk(text.encode("utf-8"))
    root = compose_text(text)
    if root is None:
        return None, False
    if "*" not in text and "<<" not in text:
        return root, False  # no alias, no merge key: nothing shared, no bomb
    problem, shared = structure_problem(root)
    if problem:
        raise SyntaxProblem(problem)
    return root, shared


def compose_text(text: str) -> Node | None:
    """The node tree of one YAML document (None when empty or null); a
    leading byte order mark is left out, so marks count as the Editor does.
    Raises SyntaxProblem."""
    if text.startswith("\ufeff"):
        text = text[1:]
    try:
        try:
            root = yaml.compose(text, Loader=Loader)
        except yaml.composer.ComposerError as err:
            if "duplicate anchor" not in f"{err.context} {err.problem}":
                raise
            root = yaml.compose(text, Loader=_RedefiningLoader)
    except yaml.YAMLError as err:
        raise SyntaxProblem(f"invalid YAML: {describe_yaml_error(err, text)}") from None
    return None if is_null(root) else root


class _RedefiningLoader(yaml.SafeLoader):
    """Composes a document whose anchor is defined twice as YAML says (the
    YAML test suite's 3GZX) and Helm's reader does: an alias refers to the
    latest node with its anchor. PyYAML's composers (libyaml's too) refuse
    such a document; this one, in Python, is used only for it."""

    def compose_node(self, parent, index):
        event = self.peek_event()
        anchor = getattr(event, "anchor", None)
        if anchor is not None and not isinstance(event, yaml.events.AliasEvent):
            self.anchors.pop(anchor, None)  # the new definition replaces the earlier one
        return super().compose_node(parent, index)


def kube_objects(document: Document) -> list[KubeObject]:
    """The objects Helm creates from a document, found as Helm's Kubernetes
    client finds them: a document with an `items` field is a List whatever
    its kind (`v1 List`, `ResourceQuotaList`, a ConfigMap carrying `items`),
    and only its items are created; Kubernetes' decoder matches that field
    without regard to case (`Items`), so such a spelling is refused. Items
    that are Lists (an exact `items` sequence) are flattened in turn. Items
    of the document's List with neither `kind` nor `apiVersion` take the
    List's kind without `List` (a `ResourceQuotaList` item is a ResourceQuota).
    A List of a kind a rule reads is refused: Helm would not create the object
    the rules would read it as."""
    top = KubeObject(document, document.root, _construct_top(document))
    for key in top.data:
        if key != "items" and isinstance(key, str) and len(key) == 5 \
                and all(ch in chars for ch, chars in zip(key, _ITEMS_FOLDS)):
            raise document.error(f"key {key!r} is read as 'items' by Kubernetes (the document would be a List); write 'items'")
    if "items" not in top.data:
        return [top]
    found: list[KubeObject] = []
    _flatten(document, top, find_entry(document.root, "items"), found, inherit=True)
    return found


# The characters Go's JSON decoder folds to each letter of `items`.
_ITEMS_FOLDS = ("iI\u0131\u0130", "tT", "eE", "mM", "sS\u017f")
_RULE_KINDS = ("Namespace", "ResourceQuota", "LimitRange", "Secret")


def _flatten(document: Document, lst: KubeObject, entry: tuple | None, found: list, inherit: bool) -> None:
    if lst.kind in _RULE_KINDS:
        raise document.error(f"{lst.label} has an 'items' field: Kubernetes reads it as a List and creates only its items")
    if entry is None or is_null(entry[2]):
        return
    _, items_key, items = entry
    if not isinstance(items, SequenceNode):
        raise document.error("List items is not a sequence")
    list_kind = lst.kind if isinstance(lst.kind, str) else ""
    for index, item in enumerate(items.value):
        if not isinstance(item, MappingNode):
            raise document.error(f"List item {index} is a {_node_kind(item)}, not a mapping")
        data = _construct(document, item)
        if inherit and not _text(data.get("kind")) and not _text(data.get("apiVersion")):
            data["kind"] = list_kind.removesuffix("List")
        obj = KubeObject(document, item, data, (items, index, items_key), lst.path)
        nested = find_entry(item, "items")
        if nested is not None and isinstance(nested[2], SequenceNode):
            _flatten(document, obj, nested, found, inherit=False)
        else:
            found.append(obj)


def _text(value: object) -> bool:
    return isinstance(value, str) and value != ""


# A quota's `spec.hard` with more entries than this is read by its keys only
# (the rules read nothing else there), when the document's values are known
# to construct (`Document.needs_tree` is false): the values of tens of
# thousands of keys are not built only to be thrown away.
_KEYS_ONLY_OVER = 64


def _construct_top(document: Document) -> dict:
    hard = None if document.needs_tree else _big_hard(document.root)
    if hard is None:
        return _construct(document, document.root)
    entries, hard.value = hard.value, []
    try:
        data = _construct(document, document.root)
    finally:
        hard.value = entries
    data["spec"]["hard"] = {key.value if key.tag == STR_TAG else construct(key): None for key, _ in entries}
    return data


def _big_hard(root: MappingNode) -> MappingNode | None:
    entry = find_entry(root, "spec")
    spec = entry[2] if entry else None
    entry = find_entry(spec, "hard") if isinstance(spec, MappingNode) else None
    hard = entry[2] if entry else None
    if isinstance(hard, MappingNode) and len(hard.value) > _KEYS_ONLY_OVER \
            and all(isinstance(key, ScalarNode) for key, _ in hard.value):
        return hard
    return None


def _construct(document: Document, node: Node) -> dict:
    try:
        data = construct(node)
    except SyntaxProblem as err:
        raise document.error(str(err)) from None
    if not isinstance(data, dict):  # a `!!set` is a mapping node, but no object
        raise document.error(f"the document is a {type(data).__name__}, not a mapping")
    return data


def construct(node: Node) -> object:
    """A node tree as Python values, as the safe constructor builds them;
    SyntaxProblem for a value it refuses (a bad timestamp, a `!!binary`
    that is not base64, a number too long for int())."""
    try:
        return Constructor().construct_document(node)
    except ConstructorError as err:
        raise SyntaxProblem(f"unsupported YAML: {describe_yaml_error(err)}") from None
    except (ValueError, TypeError, OverflowError) as err:
        raise SyntaxProblem(f"unsupported YAML: {' '.join(str(err).split())}") from None


def structure_problem(root: Node) -> tuple[str | None, bool]:
    """(an alias bomb, whether aliases or merge keys are used), in walks over
    distinct nodes."""
    seen: set[int] = set()
    aliased = merged = False
    stack = [root]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            aliased = True
            continue
        seen.add(id(node))
        if isinstance(node, MappingNode) and any(key.tag == MERGE_TAG for key, _ in node.value):
            merged = True
        stack.extend(_children(node))
    if aliased and _expanded_size(root) > MAX_EXPANDED_NODES:
        return f"aliases expand to more than {MAX_EXPANDED_NODES} nodes (an alias bomb?)", True
    return None, aliased or merged


def _expanded_size(root: Node) -> int:
    """Nodes the document would have with every alias expanded; each shared
    node is sized once (post-order), so a bomb is measured, not expanded."""
    sizes: dict[int, int] = {}
    visiting: set[int] = set()
    stack: list[tuple[Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        if id(node) in sizes:
            continue
        children = _children(node)
        if children_done:
            visiting.discard(id(node))
            sizes[id(node)] = min(1 + sum(sizes[id(c)] for c in children), MAX_EXPANDED_NODES + 1)
            continue
        if id(node) in visiting:  # a recursive alias: it never stops expanding
            return MAX_EXPANDED_NODES + 1
        visiting.add(id(node))
        stack.append((node, True))
        stack.extend((c, False) for c in children if id(c) not in sizes)
    return sizes[id(root)]


def _children(node: Node) -> list[Node]:
    if isinstance(node, MappingNode):
        return [n for pair in node.value for n in pair]
    if isinstance(node, SequenceNode):
        return list(node.value)
    return []


def _node_kind(node: Node) -> str:
    if isinstance(node, SequenceNode):
        return "sequence"
    return "scalar"
