"""The post-render pipeline: read the stream, run the filters, write it.

    read      split into chunks (stream), parse only those a rule may need
    filter    ResourceQuota budget keys, LimitRanges of GPU-only tenants,
              the tenant Namespace's vGPU label, the values Secret
    write     untouched chunks byte for byte, edited ones with their edits

Decisions come from `rules`; text edits from `yamledit`.
"""

from __future__ import annotations


import yaml
from yaml.constructor import ConstructorError, SafeConstructor
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from cozyrender.entitlement import PARENT_ANNOTATION, REQUESTED_ANNOTATION, VGPU_LABEL, label_value
from cozyrender import values_secret
from cozyrender.postrender import rules
from cozyrender.postrender.errors import EditError, PostRenderError
from cozyrender.postrender.stream import Chunk, mentions_rule_kind, source_of, split_chunks
from cozyrender.postrender.syntax import SyntaxProblem, check_chunk, describe_yaml_error
from cozyrender.postrender.yamledit import STR_TAG, Editor, child, find_entry, is_null

try:
    _Loader = yaml.CSafeLoader
except AttributeError:  # PyYAML without libyaml: same results, slower
    _Loader = yaml.SafeLoader

# Nodes a document may expand to through aliases before it counts as a bomb.
MAX_EXPANDED_NODES = 200_000
MERGE_TAG = "tag:yaml.org,2002:merge"


class PostRenderResult:
    """The post-rendered stream, and warnings for stderr."""

    __slots__ = ("output", "warnings")

    def __init__(self, output: bytes, warnings: list[str]) -> None:
        self.output, self.warnings = output, warnings


class Document:
    """A parsed chunk: its node tree and the edits made to its text."""

    __slots__ = ("chunk", "source", "editor", "root", "dropped")

    def __init__(self, chunk: Chunk, source: str | None, editor: Editor, root: MappingNode) -> None:
        self.chunk, self.source, self.editor, self.root = chunk, source, editor, root
        self.dropped = False

    def error(self, problem: str) -> PostRenderError:
        return PostRenderError(problem, self.chunk.number, self.source)


class KubeObject:
    """A Kubernetes object: a document's root, or an item of a `kind: List`
    (then `parent` is the `items` sequence, the item's index, the `items` key)."""

    __slots__ = ("document", "node", "data", "parent", "dropped")

    def __init__(self, document: Document, node: MappingNode, data: dict,
                 parent: tuple[SequenceNode, int, Node] | None = None) -> None:
        self.document, self.node, self.data, self.parent = document, node, data, parent
        self.dropped = False

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
    pending: set[int] = set()
    for index, chunk in enumerate(chunks):
        document = _read(data, chunk)
        if document is not None and any([_gather(obj, facts, warnings) for obj in _objects(document)]):
            pending.add(index)
    plan: list[int | bytes] = []
    for index, chunk in enumerate(chunks):
        if index not in pending:
            plan.append(index)
            continue
        document = _read(data, chunk, checked=True)
        objects = _objects(document)
        for obj in objects:
            _edit(obj, facts)
        _commit_list_drops(objects)
        if document.dropped:
            continue
        plan.append(document.editor.result().encode("utf-8") if document.editor.changed else index)
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


# -- read ------------------------------------------------------------------


def _read(data: bytes, chunk: Chunk, checked: bool = False) -> Document | None:
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
    if not checked:
        try:
            aliased = check_chunk(raw)
        except SyntaxProblem as err:
            raise PostRenderError(str(err), chunk.number, source_of(data, chunk)) from None
        if not (aliased or mentions_rule_kind(data, chunk)):
            return None
    source = source_of(data, chunk)
    try:
        root = yaml.compose(text, Loader=_Loader)
    except yaml.YAMLError as err:  # check_chunk passed it: a parser disagreement
        raise PostRenderError(f"invalid YAML: {describe_yaml_error(err)}", chunk.number, source) from None
    if root is None:
        return None  # empty, or comments only
    problem = _structure_problem(root)
    if problem:
        raise PostRenderError(problem, chunk.number, source)
    return Document(chunk, source, Editor(text), root)


def _objects(document: Document) -> list[KubeObject]:
    top = KubeObject(document, document.root, _construct(document, document.root))
    if top.kind != "List":
        return [top]
    entry = find_entry(document.root, "items")
    if entry is None or is_null(entry[2]):
        return [top]
    _, items_key, items = entry
    if not isinstance(items, SequenceNode):
        raise document.error("List items is not a sequence")
    found: list[KubeObject] = []
    for index, item in enumerate(items.value):
        if not isinstance(item, MappingNode):
            raise document.error(f"List item {index} is a {_node_kind(item)}, not a mapping")
        found.append(KubeObject(document, item, _construct(document, item), (items, index, items_key)))
    return found


def _construct(document: Document, node: Node) -> dict:
    try:
        return SafeConstructor().construct_document(node)
    except ConstructorError as err:
        raise document.error(f"unsupported YAML: {describe_yaml_error(err)}") from None


def _structure_problem(root: Node) -> str | None:
    """Merge keys and alias bombs, in one walk over distinct nodes."""
    seen: set[int] = set()
    order: list[Node] = []
    aliased = False
    stack = [root]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            aliased = True
            continue
        seen.add(id(node))
        order.append(node)
        if isinstance(node, MappingNode) and any(key.tag == MERGE_TAG for key, _ in node.value):
            return "merge keys (<<) are not supported in documents cozyrender edits"
        stack.extend(_children(node))
    if aliased:
        # Aliases share nodes: size each node once, children before parents.
        sizes: dict[int, int] = {}
        for node in reversed(order):
            sizes[id(node)] = 1 + sum(sizes[id(c)] for c in _children(node))
            if sizes[id(node)] > MAX_EXPANDED_NODES:
                return f"aliases expand to more than {MAX_EXPANDED_NODES} nodes (an alias bomb?)"
    return None


def _children(node: Node) -> list[Node]:
    if isinstance(node, MappingNode):
        return [n for pair in node.value for n in pair]
    if isinstance(node, SequenceNode):
        return list(node.value)
    return []


# -- filters ---------------------------------------------------------------


class Facts:
    """What the first pass learns and the second pass needs."""

    __slots__ = ("entitlements", "dropped_quota_ns", "kept_quota_ns")

    def __init__(self) -> None:
        self.entitlements: dict[object, bool] = {}  # tenant namespace -> entitled
        self.dropped_quota_ns: set = set()
        self.kept_quota_ns: set = set()


def _gather(obj: KubeObject, facts: Facts, warnings: list[str]) -> bool:
    """Record what `obj` tells the rules; True when a rule may edit it."""
    kind = obj.kind
    if kind == "Namespace":
        entitled = _entitlement(obj)
        if entitled is None:
            return False
        name = obj.metadata.get("name")
        if name in facts.entitlements:
            raise obj.document.error(f"{obj.label}: a second Namespace document for the same tenant")
        facts.entitlements[name] = entitled
        return True
    if kind == "ResourceQuota":
        decision = _quota_decision(obj)
        if decision is None:
            return False
        for key, reason in decision.malformed:
            warnings.append(_where(obj) + f": removed malformed GPU budget key {key!r} from {obj.label} ({reason})")
        if decision.drop:
            facts.dropped_quota_ns.add(obj.namespace)
        elif decision.keys:
            facts.kept_quota_ns.add(obj.namespace)
        return decision.changed
    if kind == "LimitRange":
        return True  # its fate waits for every quota of its namespace
    return kind == "Secret" and obj.metadata.get("name") == rules.VALUES_SECRET


def _edit(obj: KubeObject, facts: Facts) -> None:
    kind = obj.kind
    if kind == "Namespace" and obj.metadata.get("name") in facts.entitlements and _entitlement(obj) is not None:
        _write_vgpu_label(obj, facts.entitlements[obj.metadata.get("name")])
    elif kind == "ResourceQuota":
        _filter_quota(obj)
    elif kind == "LimitRange":
        if rules.limit_ranges_dropped(obj.namespace, facts.dropped_quota_ns, facts.kept_quota_ns):
            _drop(obj)
    elif kind == "Secret" and obj.metadata.get("name") == rules.VALUES_SECRET and obj.namespace in facts.entitlements:
        _filter_values_secret(obj, facts.entitlements[obj.namespace])


def _entitlement(obj: KubeObject) -> bool | None:
    _check_mapping_field(obj, "annotations")
    try:
        return rules.tenant_entitlement(obj.metadata.get("annotations"))
    except rules.RuleError as err:
        raise obj.document.error(f"{obj.label}: {err}") from None


def _quota_decision(obj: KubeObject) -> rules.QuotaDecision | None:
    spec = obj.data.get("spec")
    hard = spec.get("hard") if isinstance(spec, dict) else None
    if hard is None:
        return None
    if not isinstance(hard, dict) or not isinstance(child(obj.node, "spec", "hard"), MappingNode):
        raise obj.document.error(f"{obj.label}: spec.hard is not a mapping")
    return rules.decide_quota([key for key in hard if isinstance(key, str)])


def _filter_quota(obj: KubeObject) -> None:
    decision = _quota_decision(obj)
    if decision is None or not decision.changed:
        return
    if decision.drop:
        _drop(obj)
        return
    hard_node = child(obj.node, "spec", "hard")
    indices = [_entry_index(obj, hard_node, key) for key in decision.removed]
    obj.document.editor.delete_entries(hard_node, indices, owner=_owner_key(obj.node, "spec", "hard"))


def _write_vgpu_label(obj: KubeObject, entitled: bool) -> None:
    editor = obj.document.editor
    metadata = child(obj.node, "metadata")
    annotations = child(metadata, "annotations")
    # Remove the render inputs; an annotations map left empty goes too.
    indices = [_entry_index(obj, annotations, key) for key in (REQUESTED_ANNOTATION, PARENT_ANNOTATION)]
    value = label_value(entitled)
    labels = child(metadata, "labels")
    _check_mapping_field(obj, "labels")
    if len(indices) == len(annotations.value):
        annotations_index = _entry_index(obj, metadata, "annotations")
        if labels is None:  # one edit where the annotations stood
            editor.replace_entry(metadata, annotations_index, "labels", {VGPU_LABEL: value})
            return
        editor.delete_entries(metadata, [annotations_index], owner=None)
    else:
        editor.delete_entries(annotations, indices, owner=_owner_key(obj.node, "metadata", "annotations"))
    if labels is None:
        editor.add_entry(metadata, "labels", {VGPU_LABEL: value})
    elif is_null(labels):
        editor.replace_node(labels, {VGPU_LABEL: value})
    else:
        current = find_entry(labels, VGPU_LABEL)
        if current is None or current[2].tag != STR_TAG or current[2].value != value:
            editor.set_entry(labels, VGPU_LABEL, value)


def _filter_values_secret(obj: KubeObject, entitled: bool) -> None:
    editor = obj.document.editor
    for field_name, encoded in (("stringData", False), ("data", True)):
        node = child(obj.node, field_name, rules.VALUES_KEY)
        if node is None:
            continue
        where = f"{obj.label}: {field_name}.{rules.VALUES_KEY}"
        if not isinstance(node, ScalarNode) or node.tag != STR_TAG:
            raise obj.document.error(f"{where} is not a string")
        text = node.value
        if encoded:
            try:
                text = values_secret.decode(node.value)
            except values_secret.ValuesSecretError:
                raise obj.document.error(f"{where} is not base64-encoded UTF-8") from None
        try:
            new_text = edit_values(text, entitled)
        except (rules.RuleError, EditError) as err:
            raise obj.document.error(f"{where}: {err}") from None
        except yaml.YAMLError as err:
            raise obj.document.error(f"{where} does not parse: {describe_yaml_error(err)}") from None
        if new_text == text:
            continue
        if encoded:
            editor.replace(node.start_mark.index, node.end_mark.index,
                           _requote(node, values_secret.encode(new_text)))
        else:
            editor.replace_string(node, new_text)


def edit_values(text: str, entitled: bool) -> str:
    """A tenant's values.yaml with `_namespace.vgpu` and `_cluster.gpu-vgpu`
    made right; the rest as written."""
    roots = [root for root in yaml.compose_all(text, Loader=_Loader) if root is not None]
    if len(roots) > 1:
        raise rules.RuleError("more than one YAML document")
    root = roots[0] if roots else None
    if root is not None and not isinstance(root, MappingNode):
        raise rules.RuleError("not a mapping")
    problem = _structure_problem(root) if root is not None else None
    if problem:
        raise rules.RuleError(problem)
    values = SafeConstructor().construct_document(root) if root is not None else None
    decision = rules.decide_values(values, entitled)
    if not decision.changed:
        return text
    if root is None:  # blank or comments only: only an entitlement can change it
        return (text.rstrip("\n") + "\n" if text.strip() else "") + "_namespace:\n  vgpu: true\n"

    editor = Editor(text)
    namespace = child(root, "_namespace")
    if decision.remove_namespace_vgpu:
        index = find_entry(namespace, rules.NAMESPACE_VGPU)[0]
        editor.delete_entries(namespace, [index], owner=find_entry(root, "_namespace")[1])
    if decision.set_namespace_vgpu:
        if namespace is None:
            editor.add_entry(root, "_namespace", {rules.NAMESPACE_VGPU: True})
        elif is_null(namespace) or not namespace.value:
            editor.replace_node(namespace, {rules.NAMESPACE_VGPU: True})
        else:
            editor.set_entry(namespace, rules.NAMESPACE_VGPU, True)
    if decision.remove_cluster_vgpu:
        cluster = child(root, "_cluster")
        index = find_entry(cluster, rules.CLUSTER_VGPU)[0]
        editor.delete_entries(cluster, [index], owner=find_entry(root, "_cluster")[1])
    return editor.result()


# -- helpers ---------------------------------------------------------------


def _drop(obj: KubeObject) -> None:
    if obj.parent is None:
        obj.document.dropped = True
    else:
        obj.dropped = True  # removed from its List in _commit_list_drops


def _commit_list_drops(objects: list[KubeObject]) -> None:
    by_list: dict[int, tuple[KubeObject, list[int]]] = {}
    for obj in objects:
        if obj.parent is not None and obj.dropped:
            items, index, _ = obj.parent
            by_list.setdefault(id(items), (obj, []))[1].append(index)
    for first, indices in by_list.values():
        items, _, items_key = first.parent
        first.document.editor.delete_items(items, indices, owner=items_key)


def _entry_index(obj: KubeObject, mapping: Node, key: str) -> int:
    entry = find_entry(mapping, key) if isinstance(mapping, MappingNode) else None
    if entry is None:
        raise obj.document.error(f"{obj.label}: {key!r} comes from an alias or merge and cannot be edited")
    return entry[0]


def _owner_key(node: MappingNode, *path: str) -> Node:
    for key in path[:-1]:
        node = find_entry(node, key)[2]
    return find_entry(node, path[-1])[1]


def _check_mapping_field(obj: KubeObject, name: str) -> None:
    value = obj.metadata.get(name)
    if value is not None and not isinstance(value, dict):
        raise obj.document.error(f"{obj.label}: metadata.{name} is not a mapping")


def _requote(node: ScalarNode, new_value: str) -> str:
    quote = node.style if node.style in ("'", '"') else ""
    return f"{quote}{new_value}{quote}"


def _where(obj: KubeObject) -> str:
    where = f"document {obj.document.chunk.number}"
    return f"{where} ({obj.document.source})" if obj.document.source else where


def _node_kind(node: Node) -> str:
    if isinstance(node, SequenceNode):
        return "sequence"
    return "scalar"
