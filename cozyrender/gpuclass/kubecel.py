"""A CEL environment for CRD `x-kubernetes-validations` rules, on cel-expr-python
(Google's cel-cpp).

Kubernetes evaluates CRD rules with CEL's standard library, the strings
extension and its own libraries; none of the latter ship with any Python CEL
runtime, so the Kubernetes functions the shipped rules may use are registered
here: the quantity library (`isQuantity`, `quantity`, and its members
`sign`, `isInteger`, `asInteger`, `compareTo`, `isGreaterThan`,
`isLessThan`, `add`, `sub`). A quantity is a typed value (a protobuf message
`kubernetes.Quantity` holding its spelling), so the type checker refuses a
quantity compared with a string, as Kubernetes' does. A rule that uses
anything else does not compile, and `compile_rule` raises.
"""

from __future__ import annotations

from fractions import Fraction
from functools import cache

from cel_expr_python import cel
from cel_expr_python.ext.ext_strings import ExtStrings
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from cozyrender.kube.quantity import format_quantity, is_quantity, parse_quantity

SELF = "self"
OLD_SELF = "oldSelf"
_QUANTITY_TYPE_NAME = "kubernetes.Quantity"
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


class RuleCompileError(ValueError):
    """A rule the CEL environment cannot compile or that does not yield a bool."""


class RuleEvaluationError(ValueError):
    """A rule that compiled but failed at run time (no such key, overflow, ...)."""


def _quantity_pool() -> tuple[descriptor_pool.DescriptorPool, type]:
    file = descriptor_pb2.FileDescriptorProto(
        name="cozyrender/kubernetes_quantity.proto", package="kubernetes", syntax="proto3"
    )
    message = file.message_type.add(name="Quantity")
    message.field.add(
        name="text", number=1,
        type=descriptor_pb2.FieldDescriptorProto.TYPE_STRING,
        label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL,
    )
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return pool, message_factory.GetMessageClass(pool.FindMessageTypeByName(_QUANTITY_TYPE_NAME))


def _quantity_functions(quantity_message: type) -> list[cel.FunctionDecl]:
    Q, T = cel.Type(_QUANTITY_TYPE_NAME), cel.Type

    def value(q) -> Fraction:
        return parse_quantity(q.text)

    def make(text: str):
        if not is_quantity(text):
            raise ValueError(f"quantities must match the regular expression of a Kubernetes quantity: {text!r}")
        return quantity_message(text=text)

    def from_fraction(number: Fraction):
        return quantity_message(text=format_quantity(number))

    def as_integer(q) -> int:
        number = value(q)
        if number.denominator != 1 or not _INT64_MIN <= number.numerator <= _INT64_MAX:
            raise ValueError(f"cannot convert value to integer: {q.text!r}")
        return number.numerator

    def compare(a, b) -> int:
        left, right = value(a), value(b)
        return (left > right) - (left < right)

    def fn(name: str, *overloads: tuple[str, cel.Type, list, bool, object]) -> cel.FunctionDecl:
        return cel.FunctionDecl(name, [
            cel.Overload(oid, ret, params, is_member=member, impl=impl)
            for oid, ret, params, member, impl in overloads
        ])

    return [
        fn("isQuantity", ("isQuantity_string", T.BOOL, [T.STRING], False, is_quantity)),
        fn("quantity", ("quantity_string", Q, [T.STRING], False, make)),
        fn("sign", ("quantity_sign", T.INT, [Q], True,
                    lambda q: (value(q) > 0) - (value(q) < 0))),
        fn("isInteger", ("quantity_isInteger", T.BOOL, [Q], True,
                         lambda q: value(q).denominator == 1 and _INT64_MIN <= value(q) <= _INT64_MAX)),
        fn("asInteger", ("quantity_asInteger", T.INT, [Q], True, as_integer)),
        fn("compareTo", ("quantity_compareTo", T.INT, [Q, Q], True, compare)),
        fn("isGreaterThan", ("quantity_isGreaterThan", T.BOOL, [Q, Q], True, lambda a, b: compare(a, b) > 0)),
        fn("isLessThan", ("quantity_isLessThan", T.BOOL, [Q, Q], True, lambda a, b: compare(a, b) < 0)),
        fn("add",
           ("quantity_add", Q, [Q, Q], True, lambda a, b: from_fraction(value(a) + value(b))),
           ("quantity_add_int", Q, [Q, T.INT], True, lambda a, n: from_fraction(value(a) + n))),
        fn("sub",
           ("quantity_sub", Q, [Q, Q], True, lambda a, b: from_fraction(value(a) - value(b))),
           ("quantity_sub_int", Q, [Q, T.INT], True, lambda a, n: from_fraction(value(a) - n))),
    ]


@cache
def environment() -> cel.Env:
    """The one CEL environment every rule compiles in (built once)."""
    pool, quantity_message = _quantity_pool()
    return cel.NewEnv(
        descriptor_pool=pool,
        # Kubernetes types `self` from the schema; values here are plain
        # JSON-like data, so dyn with run-time checks is the faithful choice.
        variables={SELF: cel.Type.DYN, OLD_SELF: cel.Type.DYN},
        extensions=[ExtStrings()],
        functions=_quantity_functions(quantity_message),
    )


class CompiledRule:
    """One compiled rule; `holds(self, oldSelf)` evaluates it."""

    def __init__(self, rule: str) -> None:
        self.rule = rule
        try:
            self._program = environment().compile(rule)
        except RuntimeError as err:
            raise RuleCompileError(f"rule {rule!r} does not compile: {err}") from None
        result_type = self._program.return_type()
        if result_type != cel.Type.BOOL and result_type != cel.Type.DYN:
            raise RuleCompileError(f"rule {rule!r} yields {result_type.name()}, not bool")

    def holds(self, value: object, old_value: object = None) -> bool:
        data = {SELF: value}
        if old_value is not None:
            data[OLD_SELF] = old_value
        try:
            result = self._program.eval(data=data)
        except RuntimeError as err:
            raise RuleEvaluationError(str(err)) from None
        if result.type() == cel.Type.ERROR:
            raise RuleEvaluationError(str(result.value()))
        outcome = result.value()
        if not isinstance(outcome, bool):
            raise RuleEvaluationError(f"the rule yielded {outcome!r}, not a bool")
        return outcome
