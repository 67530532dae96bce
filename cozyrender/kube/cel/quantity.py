"""Kubernetes' CEL quantity library (`kubernetes.quantity`,
k8s.io/apiserver pkg/cel/library/quantity.go at v0.35.7), declared as the API
server declares it:

    quantity(string) -> Quantity                 global   string_to_quantity
    isQuantity(string) -> bool                   global   is_quantity_string
    sign(Quantity) -> int                        global   quantity_sign
    <Quantity>.isGreaterThan(Quantity) -> bool   member   quantity_is_greater_than
    <Quantity>.isLessThan(Quantity) -> bool      member   quantity_is_less_than
    <Quantity>.compareTo(Quantity) -> int        member   quantity_compare_to
    <Quantity>.asApproximateFloat() -> double    member   quantity_get_float
    <Quantity>.asInteger() -> int                member   quantity_get_int
    <Quantity>.isInteger() -> bool               member   quantity_is_integer
    <Quantity>.add(Quantity|int) -> Quantity     member   quantity_add, quantity_add_int
    <Quantity>.sub(Quantity|int) -> Quantity     member   quantity_sub, quantity_sub_int

`sign` is a global function there, so `quantity(x).sign()` does not compile
on a real API server; it does not compile here either.

A quantity is a `kubernetes.Quantity` protobuf message holding its value
normalised (coefficient without trailing zeros, and a power of ten), so CEL's
`==` compares values, as Kubernetes' `Quantity.Equal` does
(`quantity('200M') == quantity('0.2G')`). Arithmetic stays exact and in
quantities, read and written by `cozyrender.kube.quantity`.

One deliberate difference: `isInteger()`/`asInteger()` answer from the value
(a whole number within int64). Kubernetes answers from its internal
representation, so there `quantity('1.0').isInteger()`,
`quantity('1000m').isInteger()` and `quantity('9Ei').isInteger()` are false.
A message that carried that representation would break value equality
(cel-expr-python lets no library redefine `==`), and value equality is what
rules compare with.
"""

from __future__ import annotations

from cel_expr_python import cel
from google.protobuf import descriptor_pb2

from cozyrender.kube import quantity as q

TYPE_NAME = "kubernetes.Quantity"
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def add_message(file: descriptor_pb2.FileDescriptorProto) -> None:
    """Declare `kubernetes.Quantity` in `file` (package `kubernetes`)."""
    message = file.message_type.add(name="Quantity")
    optional = descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL
    message.field.add(name="coefficient", number=1, label=optional,
                      type=descriptor_pb2.FieldDescriptorProto.TYPE_STRING)
    message.field.add(name="exponent", number=2, label=optional,
                      type=descriptor_pb2.FieldDescriptorProto.TYPE_INT64)


def overloads(message_class: type | None) -> dict[str, list[tuple]]:
    """The library's declarations (name -> [(overload id, return type,
    parameters, is_member, impl)]), bound to `message_class` (the
    `kubernetes.Quantity` class of the environment's descriptor pool; None
    for an environment that only type-checks)."""
    Q, T = cel.Type(TYPE_NAME), cel.Type

    def wrap(value: q.Quantity):
        coefficient, exponent = value.normalized()
        if not _INT64_MIN <= exponent <= _INT64_MAX:
            raise ValueError("quantity out of range")
        return message_class(coefficient=str(coefficient), exponent=exponent)

    def unwrap(message) -> q.Quantity:
        return q.Quantity(int(message.coefficient or "0"), message.exponent)

    def to_quantity(text: str):
        try:
            return wrap(q.parse(text))
        except q.InvalidQuantity as err:
            raise ValueError(str(err)) from None

    def as_integer(message) -> int:
        if not is_integer(message):
            raise ValueError("cannot convert value to integer")
        return int(unwrap(message).to_fraction())

    def is_integer(message) -> bool:
        value = unwrap(message)
        if value.coefficient == 0:
            return True
        if value.normalized()[1] < 0 or value.cmp(q.Quantity(_INT64_MAX, 0)) > 0 \
                or value.cmp(q.Quantity(_INT64_MIN, 0)) < 0:
            return False
        return True

    def arithmetic(op: str):
        def run(a, b):
            left = unwrap(a)
            right = q.from_int(b) if isinstance(b, int) else unwrap(b)
            try:
                return wrap(left.add(right) if op == "add" else left.sub(right))
            except q.InvalidQuantity as err:
                raise ValueError(str(err)) from None
        return run

    def fn(name: str, *overloads: tuple) -> tuple[str, list[tuple]]:
        return name, list(overloads)

    return dict([
        fn("quantity", ("string_to_quantity", Q, [T.STRING], False, to_quantity)),
        fn("isQuantity", ("is_quantity_string", T.BOOL, [T.STRING], False, q.is_quantity)),
        fn("sign", ("quantity_sign", T.INT, [Q], False, lambda a: unwrap(a).sign())),
        fn("isGreaterThan", ("quantity_is_greater_than", T.BOOL, [Q, Q], True,
                             lambda a, b: unwrap(a).cmp(unwrap(b)) == 1)),
        fn("isLessThan", ("quantity_is_less_than", T.BOOL, [Q, Q], True,
                          lambda a, b: unwrap(a).cmp(unwrap(b)) == -1)),
        fn("compareTo", ("quantity_compare_to", T.INT, [Q, Q], True,
                         lambda a, b: unwrap(a).cmp(unwrap(b)))),
        fn("asApproximateFloat", ("quantity_get_float", T.DOUBLE, [Q], True,
                                  lambda a: unwrap(a).approximate_float())),
        fn("asInteger", ("quantity_get_int", T.INT, [Q], True, as_integer)),
        fn("isInteger", ("quantity_is_integer", T.BOOL, [Q], True, is_integer)),
        fn("add", ("quantity_add", Q, [Q, Q], True, arithmetic("add")),
           ("quantity_add_int", Q, [Q, T.INT], True, arithmetic("add"))),
        fn("sub", ("quantity_sub", Q, [Q, Q], True, arithmetic("sub")),
           ("quantity_sub_int", Q, [Q, T.INT], True, arithmetic("sub"))),
    ])
