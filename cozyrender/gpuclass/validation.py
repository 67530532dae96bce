"""Offline validation of GPUClass objects against the shipped CRD, in the API
server's order: prune unknown fields, apply defaults, validate the structural
schema, then evaluate every `x-kubernetes-validations` CEL rule with a real
CEL runtime (cel-cpp). On update the old object is pruned and defaulted too
and bound as `oldSelf`; transition rules (those that reference `oldSelf`) run
only on update and only where the old object has a value at the same path.

API (used by `cozyrender gpuclass validate` and `cozyrender check`):

    validate_gpuclass(obj, old=None) -> ValidationResult
        .ok, .violations (each with .path and .message), .object (pruned
        and defaulted), .pruned (paths of the fields dropped)

Every rule of the CRD is compiled once, when the validator is first built,
type-checked with `self` typed from the schema where it sits, as the API
server does at CRD creation (`cozyrender.kube.cel.environment`, which also says
which of the API server's CEL libraries are registered); a rule that does
not compile raises `RuleCompileError`, never admits. The API server's
estimated-cost limits are not checked (see cozyrender.kube.cel.environment).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import jsonschema
import yaml

from cozyrender.kube.cel.environment import CompiledRule, RuleCompileError, RuleEvaluationError, TypedScope
from cozyrender.kube.cel.types import DeclType, decl_type, escape
from cozyrender.gpuclass.structural import FieldError, SchemaValidator, apply_defaults, prune
from cozyrender.kube.names import SUBDOMAIN_MESSAGE, is_dns1123_subdomain
from cozyrender.oserrors import describe
from cozyrender.kube.shape import join as join_path
from cozyrender.kube.shape import ShapeError, mapping
from cozyrender.resources import crd_path

# The shipped CRD: the wheel's package data, or the checkout's file (cozyrender.resources).
CRD_PATH = crd_path()

# The API server's words when a type or enum failure keeps CEL from running.
RULES_NOT_CHECKED = (
    "some validation rules were not checked because the object was invalid; "
    "correct the existing errors to complete validation"
)
_OLD_SELF = re.compile(r"\boldSelf\b")
# Rule fields this validator honours; anything else (messageExpression,
# optionalOldSelf, ...) is refused when the CRD is loaded, not ignored.
_SUPPORTED_RULE_FIELDS = {"rule", "message", "fieldPath", "reason"}
# At the root, CEL sees only these metadata fields (as in Kubernetes).
_ROOT_METADATA_FIELDS = ("name", "generateName")


class CRDError(ValueError):
    """The CRD file itself is unusable (unreadable, wrong kind, unsupported rule field)."""


@dataclass(frozen=True)
class Rule:
    """One `x-kubernetes-validations` entry, compiled."""

    compiled: CompiledRule
    message: str
    field_path: str
    is_transition: bool

    @property
    def text(self) -> str:
        return self.compiled.rule


@dataclass
class ValidationResult:
    object: dict
    violations: list[FieldError] = field(default_factory=list)
    pruned: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.violations


@dataclass
class _SchemaNode:
    """A schema with its rules compiled and its children indexed."""

    rules: list[Rule]
    properties: dict[str, "_SchemaNode"]
    items: "_SchemaNode | None"
    additional: "_SchemaNode | None"
    list_map_keys: tuple[str, ...] | None


def _field_type(declaration: DeclType | None, name: str) -> DeclType | None:
    """The type of property `name` within an object type (None: not typed)."""
    if declaration is None or declaration.kind != "object":
        return None
    return dict(declaration.fields).get(escape(name) or "")


def _element_type(declaration: DeclType | None, kind: str) -> DeclType | None:
    return declaration.element if declaration is not None and declaration.kind == kind else None


def _compile_node(schema: Mapping, path: str, scope: TypedScope, declaration: DeclType | None) -> _SchemaNode:
    """Compile the rules at `schema` and below; `declaration` is the CEL type
    of `self` there, as the API server derives it from the schema."""
    rules = []
    for entry in schema.get("x-kubernetes-validations") or ():
        unsupported = set(entry) - _SUPPORTED_RULE_FIELDS
        if unsupported:
            raise CRDError(f"{path or '<root>'}: rule field(s) {sorted(unsupported)} are not supported offline")
        text = entry["rule"]
        rules.append(Rule(
            compiled=CompiledRule(text, scope, declaration),
            message=entry.get("message") or f"failed rule: {text}",
            field_path=entry.get("fieldPath") or "",
            is_transition=bool(_OLD_SELF.search(text)),
        ))
    properties = {
        name: _compile_node(sub, join_path(path, name), scope, _field_type(declaration, name))
        for name, sub in (schema.get("properties") or {}).items()
    }
    items = schema.get("items")
    additional = schema.get("additionalProperties")
    map_keys = None
    if schema.get("x-kubernetes-list-type") == "map":
        map_keys = tuple(schema.get("x-kubernetes-list-map-keys") or ())
    return _SchemaNode(
        rules=rules,
        properties=properties,
        items=(_compile_node(items, f"{path}[*]", scope, _element_type(declaration, "list"))
               if isinstance(items, Mapping) else None),
        additional=(_compile_node(additional, f"{path}.*", scope, _element_type(declaration, "map"))
                    if isinstance(additional, Mapping) else None),
        list_map_keys=map_keys,
    )


class CRDValidator:
    """Validation for one served version of one CRD; every rule compiled once."""

    def __init__(self, crd: Mapping, version: str | None = None) -> None:
        if crd.get("kind") != "CustomResourceDefinition":
            raise CRDError("not a CustomResourceDefinition")
        crd_spec = crd.get("spec") or {}
        self.group = crd_spec.get("group", "")
        self.kind = (crd_spec.get("names") or {}).get("kind", "")
        versions = crd_spec.get("versions") or []
        chosen = next((v for v in versions if v.get("name") == version), None) if version else next(
            (v for v in versions if v.get("storage")), None)
        if chosen is None:
            raise CRDError(f"no version {version or '(storage)'} in the CRD")
        self.version = chosen["name"]
        self.schema = chosen["schema"]["openAPIV3Schema"]
        # With the status subresource, a write to the object itself never sets its status: the
        # API server drops it on create and keeps the stored one on update.
        self.status_subresource = "status" in (chosen.get("subresources") or {})
        self._schema_validator = SchemaValidator(self.schema)
        root_type = decl_type(self.schema, resource_root=True)
        self._root = _compile_node(self.schema, "", TypedScope([root_type]), root_type)

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"

    def rules(self) -> list[Rule]:
        """Every compiled rule, for the tests that prove they compile."""
        found: list[Rule] = []
        pending = [self._root]
        while pending:
            node = pending.pop()
            found.extend(node.rules)
            pending.extend(node.properties.values())
            pending.extend(n for n in (node.items, node.additional) if n is not None)
        return found

    def validate(self, obj: Mapping, old: Mapping | None = None) -> ValidationResult:
        """Validate a create (`old` None) or an update of `old` to `obj`.
        Metadata that is not an object is a ShapeError: the API server's
        decoder refuses such an object before any validation."""
        for given in (obj, old):
            if given is not None:
                mapping(given, "metadata", given)
        new_object, pruned_paths = _pruned(obj, self.schema)
        old_object = None if old is None else _pruned(old, self.schema)[0]
        if self.status_subresource:
            new_object.pop("status", None)
            if old_object is not None and "status" in old_object:
                new_object["status"] = old_object["status"]
        result = ValidationResult(object=new_object, pruned=pruned_paths)
        result.violations.extend(self._identity_errors(new_object, old_object))
        schema_errors = self._schema_validator.errors(new_object)
        result.violations.extend(schema_errors)
        if any(error.blocking for error in schema_errors):
            result.violations.append(FieldError("", RULES_NOT_CHECKED))
        else:
            result.violations.extend(
                _rule_errors(self._root, _cel_view_of_root(new_object),
                             _cel_view_of_root(old_object) if old_object is not None else None, "")
            )
        return result

    def _identity_errors(self, obj: Mapping, old: Mapping | None) -> Iterator[FieldError]:
        """apiVersion and kind must name this CRD; an update keeps the name."""
        if obj.get("apiVersion") != self.api_version:
            yield FieldError("apiVersion", f"Unsupported value: {obj.get('apiVersion')!r}: supported values: {self.api_version!r}")
        if obj.get("kind") != self.kind:
            yield FieldError("kind", f"Unsupported value: {obj.get('kind')!r}: supported values: {self.kind!r}")
        name = (obj.get("metadata") or {}).get("name")
        if not name:
            yield FieldError("metadata.name", "Required value: name or generateName is required")
        elif not isinstance(name, str) or not is_dns1123_subdomain(name):
            # The API server's object-meta check for every custom resource.
            yield FieldError("metadata.name", f"Invalid value: {name!r}: {SUBDOMAIN_MESSAGE}")
        if old is not None and name != (old.get("metadata") or {}).get("name"):
            yield FieldError("metadata.name", "Invalid value: the name of an object cannot change on update")


def _cel_view_of_root(obj: Mapping) -> dict:
    """The root as CEL sees it: metadata reduced to name and generateName."""
    view = dict(obj)
    metadata = obj.get("metadata") or {}
    view["metadata"] = {key: metadata[key] for key in _ROOT_METADATA_FIELDS if key in metadata}
    return view


def _rule_errors(node: _SchemaNode, value, old_value, path: str) -> Iterator[FieldError]:
    for rule in node.rules:
        if rule.is_transition and old_value is None:
            continue
        where = path + rule.field_path if rule.field_path else path
        try:
            if not rule.compiled.holds(value, old_value if rule.is_transition else None):
                yield FieldError(where, f"Invalid value: {rule.message}")
        except RuleEvaluationError as err:
            yield FieldError(where, f"Invalid value: rule {rule.text!r} could not be evaluated: {err}")
    if isinstance(value, Mapping):
        old_map = old_value if isinstance(old_value, Mapping) else {}
        for key, child in value.items():
            sub = node.properties.get(key) or node.additional
            if sub is not None:
                yield from _rule_errors(sub, child, old_map.get(key), join_path(path, key))
    elif isinstance(value, list) and node.items is not None:
        old_items = _correlated_items(node, value, old_value)
        for index, item in enumerate(value):
            yield from _rule_errors(node.items, item, old_items[index], join_path(path, index))


def _correlated_items(node: _SchemaNode, items: list, old_items) -> list:
    """Old counterparts of list items: only map lists correlate, by their keys."""
    if not node.list_map_keys or not isinstance(old_items, list):
        return [None] * len(items)

    def key_of(item):
        return tuple((item or {}).get(k) for k in node.list_map_keys) if isinstance(item, Mapping) else None

    old_by_key = {key_of(item): item for item in old_items}
    return [old_by_key.get(key_of(item)) for item in items]


def _text_again(path: str) -> str | None:
    """A CRD file's text, to word its YAML error (a tab is called a tab)."""
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except (OSError, ValueError):
        return None


@cache
def _validator_for(path: str, mtime_ns: int) -> CRDValidator:
    from cozyrender.yamlio import SafeLoader, yaml_problem

    try:
        with open(path, encoding="utf-8") as handle:
            crd = yaml.load(handle, Loader=SafeLoader)
    except UnicodeDecodeError as err:
        raise CRDError(f"{path}: not UTF-8 text (byte {err.start}: {err.reason})") from None
    except OSError as err:
        raise CRDError(f"{path}: cannot read: {describe(err)}") from None
    except yaml.YAMLError as err:
        raise CRDError(f"{path}: not valid YAML: {yaml_problem(err, text=_text_again(path))}") from None
    if not isinstance(crd, Mapping):
        raise CRDError(f"{path}: not a CustomResourceDefinition")
    try:
        return CRDValidator(crd)
    except CRDError as err:
        raise CRDError(f"{path}: {err}") from None
    except (KeyError, TypeError, AttributeError) as err:
        raise CRDError(f"{path}: malformed CustomResourceDefinition ({err!r})") from None
    except jsonschema.SchemaError as err:
        raise CRDError(f"{path}: the schema is not valid: {err.message}") from None


def load_validator(path: str | Path = CRD_PATH) -> CRDValidator:
    """The validator for a CRD file, compiled once per file version."""
    resolved = Path(path).resolve()
    try:
        mtime = resolved.stat().st_mtime_ns
    except OSError as err:
        raise CRDError(f"{resolved}: cannot read: {err}") from None
    return _validator_for(str(resolved), mtime)


def _pruned(obj: Mapping, schema) -> tuple[dict, list[str]]:
    """`obj` pruned of unknown fields and defaulted, as the API server stores
    it; ShapeError naming the object when it nests past Python's stack (an
    unknown field hundreds of levels deep: bounded here, in words)."""
    try:
        pruned, paths = prune(obj, schema)
        apply_defaults(pruned, schema)
    except RecursionError:
        name = obj.get("metadata", {}).get("name") if isinstance(obj.get("metadata"), Mapping) else None
        raise ShapeError(f"{obj.get('kind') or 'object'} {name or '<unnamed>'}: nested too deeply to validate "
                         "(hundreds of levels)", obj) from None
    return pruned, paths


def validate_gpuclass(obj: Mapping, old: Mapping | None = None, crd_path: str | Path = CRD_PATH) -> ValidationResult:
    """Validate a GPUClass create (`old` None) or update against the shipped CRD."""
    return load_validator(crd_path).validate(obj, old)


__all__ = [
    "CRD_PATH", "CRDError", "CRDValidator", "FieldError", "Rule", "RuleCompileError",
    "ValidationResult", "load_validator", "validate_gpuclass",
]
