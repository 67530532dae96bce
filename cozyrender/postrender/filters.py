"""The filters: each rule applied to the Kubernetes objects of a stream.

The first pass `gather`s the facts the rules need across documents; the
second `edit`s each object the rules change. Decisions come from `rules`,
text edits from `yamledit`.
"""

from __future__ import annotations

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode

from cozyrender import values_secret
from cozyrender.keys import near_miss_budget_key, near_miss_message
from cozyrender.entitlement import PARENT_ANNOTATION, REQUESTED_ANNOTATION, VGPU_LABEL, label_value
from cozyrender.postrender import rules
from cozyrender.postrender.document import SHARED_NODES, KubeObject, compose_checked, compose_text, construct
from cozyrender.postrender.errors import EditError
from cozyrender.postrender.syntax import SyntaxProblem, describe_yaml_error
from cozyrender.postrender.verify import Intent, check_edit
from cozyrender.postrender.yamledit import STR_TAG, Editor, child, find_entry, is_null


class Facts:
    """What the first pass learns and the second pass needs."""

    __slots__ = ("entitlements", "dropped_quota_ns", "kept_quota_ns")

    def __init__(self) -> None:
        self.entitlements: dict[object, bool] = {}  # tenant namespace -> entitled
        self.dropped_quota_ns: set = set()
        self.kept_quota_ns: set = set()


# What `gather` says of an object: a rule edits it, or may, once every fact is in.
EDIT = ("edit", None)


def gather(obj: KubeObject, facts: Facts, warnings: list[str]) -> tuple[str, object] | None:
    """Record what `obj` tells the rules; say whether a rule edits it (EDIT),
    may edit it depending on facts still to come ((kind, namespace)), or not (None)."""
    kind = obj.kind
    if kind == "Namespace":
        entitled = _entitlement(obj)
        if entitled is None:
            if not _stock_tenant(obj):
                return None
            entitled = False
            warnings.append(obj.document.error(
                f"{obj.label} is a Cozystack tenant namespace without the vGPU render inputs (its chart does not "
                f"render them): treated as not entitled, labelled {VGPU_LABEL}: \"false\"").message)
        name = obj.metadata.get("name")
        if not isinstance(name, str) or not name:
            # Facts are keyed by the name a values Secret gives as its namespace: a
            # Secret without one (placed in Helm's release namespace, the parent's)
            # would take a nameless tenant's entitlement.
            raise obj.document.error(f"{obj.label}: a tenant Namespace without a metadata.name")
        if name in facts.entitlements:
            raise obj.document.error(f"{obj.label}: a second Namespace document for the same tenant")
        facts.entitlements[name] = entitled
        return EDIT
    if kind == "ResourceQuota":
        decision = obj.decision = _quota_decision(obj)
        for key in obj.data["spec"]["hard"] if decision is not None else ():
            meant = near_miss_budget_key(key) if isinstance(key, str) else None
            if meant is not None:
                warnings.append(obj.document.error(f"{obj.label}: {near_miss_message(key, meant)}").message)
        if decision is None:
            return None
        for key, reason in decision.malformed:
            warnings.append(obj.document.error(f"removed malformed GPU budget key {key!r} from {obj.label} ({reason})").message)
        if decision.drop:
            facts.dropped_quota_ns.add(obj.namespace)
        elif decision.keeps:
            facts.kept_quota_ns.add(obj.namespace)
        return EDIT if decision.changed else None
    if kind == "LimitRange" or values_secret.is_values_secret(obj.data):
        return (kind, obj.namespace)  # its fate waits for every quota, or its Namespace
    return None


def needs_edit(wait: tuple[str, object], facts: Facts) -> bool:
    """Whether an object `gather` put on hold is edited, now that every fact is in."""
    kind, namespace = wait
    if kind == "LimitRange":
        return rules.limit_ranges_dropped(namespace, facts.dropped_quota_ns, facts.kept_quota_ns)
    return kind == "edit" or namespace in facts.entitlements


def edit(obj: KubeObject, facts: Facts) -> None:
    kind = obj.kind
    if kind == "Namespace" and obj.metadata.get("name") in facts.entitlements and (
            _entitlement(obj) is not None or _stock_tenant(obj)):
        _write_vgpu_label(obj, facts.entitlements[obj.metadata.get("name")])
    elif kind == "ResourceQuota":
        _filter_quota(obj)
    elif kind == "LimitRange":
        if rules.limit_ranges_dropped(obj.namespace, facts.dropped_quota_ns, facts.kept_quota_ns):
            _drop(obj)
    elif values_secret.is_values_secret(obj.data) and obj.namespace in facts.entitlements:
        _filter_values_secret(obj, facts.entitlements[obj.namespace])


def _entitlement(obj: KubeObject) -> bool | None:
    _check_mapping_field(obj, "annotations")
    try:
        return rules.tenant_entitlement(obj.metadata.get("annotations"))
    except rules.RuleError as err:
        raise obj.document.error(f"{obj.label}: {err}") from None


def _stock_tenant(obj: KubeObject) -> bool:
    _check_mapping_field(obj, "labels")
    return rules.is_stock_tenant_namespace(obj.metadata.get("name"), obj.metadata.get("labels"),
                                           obj.metadata.get("annotations"))


def _quota_decision(obj: KubeObject) -> rules.QuotaDecision | None:
    spec = obj.data.get("spec")
    hard = spec.get("hard") if isinstance(spec, dict) else None
    if hard is None:
        return None
    if not isinstance(hard, dict) or not isinstance(child(obj.node, "spec", "hard"), MappingNode):
        raise obj.document.error(f"{obj.label}: spec.hard is not a mapping")
    return rules.decide_quota(list(hard))


def _filter_quota(obj: KubeObject) -> None:
    decision = obj.decision if obj.decision is not None else _quota_decision(obj)
    if decision is None or not decision.changed:
        return
    if decision.drop:
        _drop(obj)
        return
    hard_node = child(obj.node, "spec", "hard")
    indices = _entry_indices(obj, hard_node, decision.removed)
    obj.document.editor.delete_entries(hard_node, indices, owner=_owner_key(obj.node, "spec", "hard"))
    obj.document.intent.remove(obj.path + ("spec", "hard"), decision.removed)


def _write_vgpu_label(obj: KubeObject, entitled: bool) -> None:
    editor, intent = obj.document.editor, obj.document.intent
    at = obj.path + ("metadata",)
    metadata = child(obj.node, "metadata")
    annotations = child(metadata, "annotations")
    # Remove the render inputs (when there are any); an annotations map left empty goes too.
    inputs = [key for key in (REQUESTED_ANNOTATION, PARENT_ANNOTATION)
              if isinstance(annotations, MappingNode) and find_entry(annotations, key) is not None]
    value = label_value(entitled)
    labels = child(metadata, "labels")
    _check_mapping_field(obj, "labels")
    if inputs:
        indices = _entry_indices(obj, annotations, inputs)
        if len(indices) == len(annotations.value):
            annotations_index = _entry_indices(obj, metadata, ["annotations"])[0]
            intent.remove(at, ["annotations"])
            if labels is None:  # one edit where the annotations stood
                editor.replace_entry(metadata, annotations_index, "labels", {VGPU_LABEL: value})
                intent.set(at, "labels", {VGPU_LABEL: value})
                return
            editor.delete_entries(metadata, [annotations_index], owner=None)
        else:
            editor.delete_entries(annotations, indices, owner=_owner_key(obj.node, "metadata", "annotations"))
            intent.remove(at + ("annotations",), inputs)
    if labels is None:
        editor.add_entry(metadata, "labels", {VGPU_LABEL: value})
        intent.set(at, "labels", {VGPU_LABEL: value})
    elif is_null(labels):
        editor.set_value(metadata, _entry_indices(obj, metadata, ["labels"])[0], {VGPU_LABEL: value})
        intent.set(at, "labels", {VGPU_LABEL: value})
    else:
        current = find_entry(labels, VGPU_LABEL)
        if current is None or current[2].tag != STR_TAG or current[2].value != value:
            editor.set_entry(labels, VGPU_LABEL, value)
        intent.set(at + ("labels",), VGPU_LABEL, value)


def _filter_values_secret(obj: KubeObject, entitled: bool) -> None:
    editor = obj.document.editor
    for field_name, encoded in (("stringData", False), ("data", True)):
        node = child(obj.node, field_name, values_secret.VALUES_KEY)
        if node is None:
            continue
        where = f"{obj.label}: {field_name}.{values_secret.VALUES_KEY}"
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
        except SyntaxProblem as err:
            raise obj.document.error(f"{where} does not parse: {err}") from None
        except yaml.YAMLError as err:
            raise obj.document.error(f"{where} does not parse: {describe_yaml_error(err)}") from None
        if new_text == text:
            continue
        if encoded:
            new_value = values_secret.encode(new_text)
            editor.replace_scalar_text(node, _requote(node, new_value))
        else:
            new_value = new_text
            editor.replace_string(node, new_text)
        obj.document.intent.set(obj.path + (field_name,), values_secret.VALUES_KEY, ("s", STR_TAG, new_value))


def edit_values(text: str, entitled: bool) -> str:
    """A tenant's values.yaml with `_namespace.vgpu` and `_cluster.gpu-vgpu`
    made right; the rest as written."""
    root, shared = compose_checked(text)
    values = construct(root) if root is not None else None
    decision = rules.decide_values(values, entitled)
    if not decision.changed:
        return text
    if shared:
        raise rules.RuleError(SHARED_NODES)
    intent = Intent()
    if root is None:  # blank or comments only: only an entitlement can change it
        intent.set((), "_namespace", {rules.NAMESPACE_VGPU: True})
        new_text = (text.rstrip("\n") + "\n" if text.strip() else "") + "_namespace:\n  vgpu: true\n"
    else:
        editor = Editor(text)
        namespace = child(root, "_namespace")
        if decision.remove_namespace_vgpu:
            index = find_entry(namespace, rules.NAMESPACE_VGPU)[0]
            editor.delete_entries(namespace, [index], owner=find_entry(root, "_namespace")[1])
            intent.remove(("_namespace",), [rules.NAMESPACE_VGPU])
        if decision.set_namespace_vgpu:
            if namespace is None or is_null(namespace):
                if namespace is None:
                    editor.add_entry(root, "_namespace", {rules.NAMESPACE_VGPU: True})
                else:
                    editor.set_value(root, find_entry(root, "_namespace")[0], {rules.NAMESPACE_VGPU: True})
                intent.set((), "_namespace", {rules.NAMESPACE_VGPU: True})
            else:
                editor.set_entry(namespace, rules.NAMESPACE_VGPU, True)
                intent.set(("_namespace",), rules.NAMESPACE_VGPU, True)
        if decision.remove_cluster_vgpu:
            cluster = child(root, "_cluster")
            index = find_entry(cluster, rules.CLUSTER_VGPU)[0]
            editor.delete_entries(cluster, [index], owner=find_entry(root, "_cluster")[1])
            intent.remove(("_cluster",), [rules.CLUSTER_VGPU])
        new_text = editor.result()
    verify_values(root, new_text, intent)
    return new_text


def verify_values(root: Node | None, new_text: str, intent: Intent) -> None:
    """The edited values.yaml, parsed again, is the original with exactly
    `intent` applied (the rule of `verify`); EditError otherwise."""
    try:  # a parse is enough: the comparison sees what the event pass would (duplicate keys, tags)
        edited = compose_text(new_text)
    except SyntaxProblem as err:
        raise EditError(f"the edited text does not parse ({err}); nothing was written") from None
    check_edit(root, edited, intent)

def _drop(obj: KubeObject) -> None:
    if obj.parent is None:
        obj.document.dropped = True
    else:
        obj.dropped = True  # removed from its List in _commit_list_drops


def commit_list_drops(objects: list[KubeObject]) -> None:
    by_list: dict[int, tuple[KubeObject, list[int]]] = {}
    for obj in objects:
        if obj.parent is not None and obj.dropped:
            items, index, _ = obj.parent
            by_list.setdefault(id(items), (obj, []))[1].append(index)
    for first, indices in by_list.values():
        items, _, items_key = first.parent
        first.document.editor.delete_items(items, indices, owner=items_key)
        first.document.intent.remove_items(first.path[:-1], indices)


def _entry_indices(obj: KubeObject, mapping: Node, keys) -> list[int]:
    """The indices of the entries with these string keys, in one pass over
    the mapping (removing N keys stays linear)."""
    wanted = set(keys)
    found: dict[str, int] = {}
    if isinstance(mapping, MappingNode):
        for index, (key_node, _) in enumerate(mapping.value):
            if isinstance(key_node, ScalarNode) and key_node.tag == STR_TAG and key_node.value in wanted:
                found.setdefault(key_node.value, index)
    for key in keys:
        if key not in found:
            raise obj.document.error(f"{obj.label}: {key!r} comes from an alias or merge and cannot be edited")
    return [found[key] for key in keys]


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
