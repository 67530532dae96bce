"""The CEL type of `self` for a rule, from the structural schema where the
rule sits, as the API server types it when it compiles CRD rules
(k8s.io/apiserver pkg/cel/common/schemas.go `SchemaDeclType`, v0.35.7):

* `x-kubernetes-int-or-string` is dyn;
* an object with `additionalProperties` is `map(string, V)`; any other object
  is a record with exactly its declared properties, so a rule naming an
  undeclared field does not compile ("undefined field") even under
  `x-kubernetes-preserve-unknown-fields`, which the API server ignores here;
* at the resource root (and at an `x-kubernetes-embedded-resource`),
  `apiVersion`, `kind` and `metadata` with only `name` and `generateName`
  are declared whatever the schema says;
* string is string, except formats `byte` (bytes), `duration` (duration),
  `date` and `date-time` (timestamp); integer is int, number double,
  boolean bool, array `list(T)`;
* a property name is escaped as the API server escapes it (`foo-bar` is
  `foo__dash__bar`, `namespace` is `__namespace__`, ...); a name that
  cannot be escaped, and a schema with no type, is not accessible.

Records are protobuf messages built here, one per object schema, so
cel-expr-python's type checker sees the same field types. Protobuf cannot
nest a list or a map directly inside a list or a map: such an element is
typed dyn (`google.protobuf.Value`), looser than the API server (a rule it
would refuse for that element's type can compile here).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from cel_expr_python import cel
from google.protobuf import descriptor_pb2, descriptor_pool, duration_pb2, message_factory, struct_pb2, timestamp_pb2

from cozyrender.kube.cel import net, quantity, semver

_FIELD = descriptor_pb2.FieldDescriptorProto
_CEL_RESERVED = frozenset({
    "true", "false", "null", "in", "as", "break", "const", "continue", "else", "for", "function",
    "if", "import", "let", "loop", "package", "namespace", "return", "var", "void", "while",
})
_ESCAPABLE = re.compile(r"\A[a-zA-Z_./-][a-zA-Z0-9_./-]*\Z")
_SCALARS = {
    "string": (cel.Type.STRING, _FIELD.TYPE_STRING, None),
    "bytes": (cel.Type.BYTES, _FIELD.TYPE_BYTES, None),
    "int": (cel.Type.INT, _FIELD.TYPE_INT64, None),
    "double": (cel.Type.DOUBLE, _FIELD.TYPE_DOUBLE, None),
    "bool": (cel.Type.BOOL, _FIELD.TYPE_BOOL, None),
    "timestamp": (cel.Type.TIMESTAMP, _FIELD.TYPE_MESSAGE, ".google.protobuf.Timestamp"),
    "duration": (cel.Type.DURATION, _FIELD.TYPE_MESSAGE, ".google.protobuf.Duration"),
    "dyn": (cel.Type.DYN, _FIELD.TYPE_MESSAGE, ".google.protobuf.Value"),
}
_WELL_KNOWN = (struct_pb2, timestamp_pb2, duration_pb2)


def _map_entry_name(field: str) -> str:
    """protoc's name for a map field's entry message (`x__dash__y` ->
    `XDashYEntry`): descriptors that name it otherwise are invalid."""
    out, upper = [], True
    for char in field:
        if char == "_":
            upper = True
        else:
            out.append(char.upper() if upper else char)
            upper = False
    return "".join(out) + "Entry"


def escape(name: str) -> str | None:
    """A property name as a CEL identifier (apiserver cel.Escape), or None."""
    if name in _CEL_RESERVED:
        return f"__{name}__"
    if not _ESCAPABLE.match(name):
        return None
    out = name.replace("__", "__underscores__")
    return out.replace(".", "__dot__").replace("-", "__dash__").replace("/", "__slash__")


@dataclass(frozen=True)
class DeclType:
    """A CEL type: `kind` is a scalar name, "list", "map" or "object"."""

    kind: str
    element: DeclType | None = None
    fields: tuple[tuple[str, DeclType], ...] = ()
    name: str = ""


_OBJECT_META = DeclType("object", fields=(("name", DeclType("string")), ("generateName", DeclType("string"))),
                        name="ObjectMeta")


def decl_type(schema: Mapping | None, resource_root: bool = False, path: str = "Object") -> DeclType | None:
    """The type the API server gives values under `schema`; None when a value
    there is not accessible to rules."""
    if not isinstance(schema, Mapping):
        return None
    if schema.get("x-kubernetes-int-or-string"):
        return DeclType("dyn")
    kind = schema.get("type")
    properties = dict(schema.get("properties") or {})
    if resource_root or schema.get("x-kubernetes-embedded-resource"):
        kind = "object"
    if kind == "array":
        items = schema.get("items")
        element = decl_type(items, bool(isinstance(items, Mapping) and items.get("x-kubernetes-embedded-resource")),
                            f"{path}_items")
        return DeclType("list", element) if element is not None else None
    if kind == "object":
        additional = schema.get("additionalProperties")
        if isinstance(additional, Mapping):
            element = decl_type(additional, bool(additional.get("x-kubernetes-embedded-resource")), f"{path}_values")
            return DeclType("map", element) if element is not None else None
        fields: dict[str, DeclType] = {}
        for prop, sub in sorted(properties.items()):
            field_type = decl_type(sub, bool(isinstance(sub, Mapping) and sub.get("x-kubernetes-embedded-resource")),
                                   f"{path}_{re.sub(r'[^A-Za-z0-9]', '_', prop)}")
            escaped = escape(prop)
            if field_type is not None and escaped is not None:
                fields[escaped] = field_type
        if resource_root or schema.get("x-kubernetes-embedded-resource"):
            fields["apiVersion"] = DeclType("string")
            fields["kind"] = DeclType("string")
            fields["metadata"] = _OBJECT_META
        return DeclType("object", fields=tuple(sorted(fields.items())), name=path)
    if kind == "string":
        if schema.get("format") == "date":
            return DeclType("timestamp", name="date")  # read as a date, typed as a timestamp
        return DeclType({"byte": "bytes", "duration": "duration",
                         "date-time": "timestamp"}.get(schema.get("format"), "string"))
    if kind == "integer":
        return DeclType("int")
    if kind == "number":
        return DeclType("double")
    if kind == "boolean":
        return DeclType("bool")
    return None


class TypeRegistry:
    """A descriptor pool holding the well-known types, `kubernetes.Quantity`
    and one message per object type, and the CEL type of each DeclType."""

    PACKAGE = "cozyrender.crd"

    def __init__(self, roots: list[DeclType]) -> None:
        self._file = descriptor_pb2.FileDescriptorProto(
            # proto2: proto3 refuses fields whose derived JSON names collide (`a_b`, `aB`).
            name="cozyrender/crd_types.proto", package=self.PACKAGE, syntax="proto2",
            dependency=[m.DESCRIPTOR.name for m in _WELL_KNOWN])
        self._declared: set[str] = set()
        for root in roots:
            self._declare(root)
        self.pool = descriptor_pool.DescriptorPool()
        for module in _WELL_KNOWN:
            proto = descriptor_pb2.FileDescriptorProto()
            module.DESCRIPTOR.CopyToProto(proto)
            self.pool.Add(proto)
        quantity_file = descriptor_pb2.FileDescriptorProto(
            name="cozyrender/kubernetes_types.proto", package="kubernetes", syntax="proto3")
        quantity.add_message(quantity_file)
        semver.add_message(quantity_file)
        self.pool.Add(quantity_file)
        never_file = descriptor_pb2.FileDescriptorProto(
            name="cozyrender/never.proto", package="cozyrender", syntax="proto3")
        never_file.message_type.add(name="Never")
        self.pool.Add(never_file)
        net_file = descriptor_pb2.FileDescriptorProto(name="cozyrender/net.proto", package="net", syntax="proto3")
        net.add_messages(net_file)
        self.pool.Add(net_file)
        self.ip_class = message_factory.GetMessageClass(self.pool.FindMessageTypeByName(net.IP_TYPE))
        self.cidr_class = message_factory.GetMessageClass(self.pool.FindMessageTypeByName(net.CIDR_TYPE))
        self.semver_class = message_factory.GetMessageClass(
            self.pool.FindMessageTypeByName(semver.SEMVER_TYPE))
        self.pool.Add(self._file)
        self.quantity_class = message_factory.GetMessageClass(
            self.pool.FindMessageTypeByName(quantity.TYPE_NAME))

    def _declare(self, decl: DeclType) -> None:
        if decl.kind in ("list", "map"):
            self._declare(decl.element)
            return
        if decl.kind != "object" or decl.name in self._declared:
            return
        self._declared.add(decl.name)
        message = self._file.message_type.add(name=decl.name)
        for number, (name, field_type) in enumerate(decl.fields, start=1):
            self._declare(field_type)
            self._add_field(message, name, number, field_type)

    def _add_field(self, message, name: str, number: int, decl: DeclType) -> None:
        label = _FIELD.LABEL_OPTIONAL
        if decl.kind == "list":
            label, decl = _FIELD.LABEL_REPEATED, decl.element
            if decl.kind in ("list", "map"):
                decl = DeclType("dyn")
        elif decl.kind == "map" and any(n.name == _map_entry_name(name) for n in message.nested_type):
            decl = DeclType("dyn")  # two map fields whose entry names collide: the second is dyn
        elif decl.kind == "map":
            entry = message.nested_type.add(name=_map_entry_name(name))
            entry.options.map_entry = True
            entry.field.add(name="key", number=1, label=_FIELD.LABEL_OPTIONAL, type=_FIELD.TYPE_STRING)
            value = decl.element if decl.element.kind not in ("list", "map") else DeclType("dyn")
            kind, type_name = self._proto_type(value)
            entry.field.add(name="value", number=2, label=_FIELD.LABEL_OPTIONAL, type=kind,
                            **({"type_name": type_name} if type_name else {}))
            message.field.add(name=name, number=number, label=_FIELD.LABEL_REPEATED, type=_FIELD.TYPE_MESSAGE,
                              json_name=name, type_name=f".{self.PACKAGE}.{message.name}.{entry.name}")
            return
        kind, type_name = self._proto_type(decl)
        # json_name spelled out: protobuf's derived ones collide for `a_b` and `aB`.
        message.field.add(name=name, number=number, label=label, type=kind, json_name=name,
                          **({"type_name": type_name} if type_name else {}))

    def _proto_type(self, decl: DeclType) -> tuple[int, str | None]:
        if decl.kind == "object":
            return _FIELD.TYPE_MESSAGE, f".{self.PACKAGE}.{decl.name}"
        _, kind, type_name = _SCALARS[decl.kind]
        return kind, type_name

    def cel_type(self, decl: DeclType | None) -> cel.Type:
        if decl is None:
            return cel.Type.DYN
        if decl.kind == "object":
            return cel.Type(f"{self.PACKAGE}.{decl.name}")
        if decl.kind == "list":
            return cel.Type.List(self.cel_type(decl.element))
        if decl.kind == "map":
            return cel.Type.Map(cel.Type.STRING, self.cel_type(decl.element))
        return _SCALARS[decl.kind][0]
