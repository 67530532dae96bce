"""The CEL environment of CRD `x-kubernetes-validations` rules, on
cel-expr-python (Google's cel-cpp), declared as the Kubernetes 1.35 API
server declares it.

The API server compiles a new CRD's rules in its base environment at the
compatibility version (1.34 for a 1.35 server; k8s.io/apiserver
pkg/cel/environment/base.go at v0.35.7), with `self` (and `oldSelf`) typed
from the schema where the rule sits. Registered here, with the API
server's overload ids and function/member forms:

* CEL's standard library (cel-cpp's);
* the strings extension at version 2 (`strings`, no `reverse`);
* Kubernetes' quantity library (`quantity`; `sign` is global);
* Kubernetes' lists library (`lists`: `isSorted`, `sum`, `min`,
  `max`, list `indexOf`/`lastIndexOf`; the last two for scalar elements);
* cel-go's sets extension (`sets.contains`, `sets.equivalent`,
  `sets.intersects`; for lists of scalars);
* Kubernetes' IP and CIDR libraries (`net`; without the
  `string(ip)`/`string(cidr)` conversions, which cel-expr-python cannot
  add to `string`);
* Kubernetes' semver library at version 1 (`semver`);
* optional types (`cel.OptionalTypes()`: `self.?field`, `.orValue()`).

Declared by the API server but NOT registered here, so a rule using them
fails the offline check (a false refusal, never a false admission):
Kubernetes' URLs, Regex (`find`, `findAll`), Authz, AuthzSelectors and
Format libraries, and cel-go's TwoVarComprehensions and Lists v3
extensions. (Authz and AuthzSelectors need the `authorizer` variable,
which CRD rules never have.) The API server's compile-time validators run
on every type-checked rule (`validators`: literal regex, duration
and timestamp arguments, homogeneous list and map literals). Not
reproduced: cross-type numeric comparisons (`1 < 1.5` compiles on the API
server, not here: cel-expr-python lets no library add overloads to `_<_`;
a false refusal), and cost estimation: cel-expr-python exposes no cost
estimator, so the API server's per-rule and per-CRD estimated cost limits
are not checked offline (a rule it refuses as too expensive, such as
`matches` on a string with no maxLength inside a list with no maxItems,
passes here).

Compiling a rule (`CompiledRule(rule, schema)`) type-checks it against the
schema's types (`types`), as the API server does at CRD creation,
and refuses a rule that does not compile or does not yield a bool.
Evaluation runs the same rule in an environment where `self` is dyn and
values are plain decoded JSON, which is how the API server's values
behave at run time (a missing field is "no such key"), except that strings
of format date-time, date, duration and byte become timestamps, durations
and bytes, as the API server converts them (`values`).
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache

from cel_expr_python import cel
from cel_expr_python.ext.ext_optional import ExtOptional

from cozyrender.kube.cel import lists, net, quantity, semver, strings, validators
from cozyrender.kube.cel.types import DeclType, TypeRegistry, decl_type
from cozyrender.kube.cel.values import to_cel, without_nul

SELF = "self"
OLD_SELF = "oldSelf"

REGISTERED_LIBRARIES = ("standard", "strings v2", "kubernetes.quantity", "kubernetes.lists", "cel.lib.ext.sets",
                        "kubernetes.net.ip", "kubernetes.net.cidr", "kubernetes.Semver v1", "optional types")
NOT_REGISTERED_LIBRARIES = (
    "kubernetes.urls", "kubernetes.regex", "kubernetes.authz",
    "kubernetes.authzSelectors", "kubernetes.format",
    "two-variable comprehensions", "cel.lib.ext.lists v3",
)


class RuleCompileError(ValueError):
    """A rule the CEL environment cannot compile or that does not yield a bool."""




class RuleEvaluationError(ValueError):
    """A rule that compiled but failed at run time (no such key, overflow, ...)."""


def _kind(cel_type: cel.Type) -> str:
    """The runtime kind cel-cpp dispatches on (every message type alike)."""
    return "message" if cel_type.is_message() else cel_type.name().split("<")[0]


def _accepts(cel_type: cel.Type, value: object) -> bool:
    if cel_type.is_message():
        descriptor = getattr(value, "DESCRIPTOR", None)
        return descriptor is not None and descriptor.full_name == cel_type.name()
    return True


def _dispatcher(candidates: list[tuple[list[cel.Type], object]]):
    """One implementation for overloads cel-cpp cannot tell apart at run
    time (quantity and semver both have compareTo(message)): the Python
    impl whose message parameters match the arguments' types."""
    def run(*args):
        for params, impl in candidates:
            if all(_accepts(param, arg) for param, arg in zip(params, args)):
                return impl(*args)
        raise ValueError("no such overload")
    return run


def _functions(registry: TypeRegistry) -> list[cel.FunctionDecl]:
    """Every library's overloads, merged by function name (the strings
    extension and the lists library both declare indexOf/lastIndexOf, the
    quantity and semver libraries compareTo...). Overloads with the same
    runtime kinds share one dispatching implementation."""
    merged: dict[str, list[tuple]] = {}
    for library in (quantity.overloads(registry.quantity_class), strings.overloads(),
                    lists.overloads(), lists.sets_overloads(),
                    net.overloads(registry.ip_class, registry.cidr_class),
                    semver.overloads(registry.semver_class)):
        for name, overloads in library.items():
            merged.setdefault(name, []).extend(overloads)
    declarations = []
    for name, overloads in merged.items():
        groups: dict[tuple, list[int]] = {}
        for index, (_, _, params, member, impl) in enumerate(overloads):
            if impl is not None:
                groups.setdefault((member, tuple(_kind(p) for p in params)), []).append(index)
        impls: dict[int, object] = {}
        for indexes in groups.values():
            first = indexes[0]
            if len(indexes) == 1:
                impls[first] = overloads[first][4]
                continue
            if len({overloads[i][1].name() for i in indexes}) != 1:
                raise RuntimeError(f"{name}: overloads sharing a runtime signature must share a return type")
            impls[first] = _dispatcher([(overloads[i][2], overloads[i][4]) for i in indexes])
        declarations.append(cel.FunctionDecl(name, [
            cel.Overload(oid, ret, params, is_member=member, **({"impl": impls[i]} if i in impls else {}))
            for i, (oid, ret, params, member, _) in enumerate(overloads)
        ]))
    return declarations


def _new_env(registry: TypeRegistry, self_type: cel.Type) -> cel.Env:
    return cel.NewEnv(
        descriptor_pool=registry.pool,
        variables={SELF: self_type, OLD_SELF: self_type},
        extensions=[ExtOptional()],
        functions=_functions(registry),
    )


@cache
def _runtime() -> tuple[TypeRegistry, cel.Env]:
    registry = TypeRegistry([])
    return registry, _new_env(registry, cel.Type.DYN)


def environment() -> cel.Env:
    """The evaluation environment (`self` dyn), built once."""
    return _runtime()[1]


@cache
def variables_environment(*names: str) -> cel.Env:
    """An evaluation environment with the same libraries whose variables are
    `names` (each dyn) instead of `self`: for Kubernetes' other CEL uses,
    such as DRA's `device` (`cozyrender.kube.cel.devices`)."""
    registry = _runtime()[0]
    return cel.NewEnv(descriptor_pool=registry.pool, variables={name: cel.Type.DYN for name in names},
                      extensions=[ExtOptional()], functions=_functions(registry))


def message_classes():
    """The runtime's `kubernetes.Quantity` and `kubernetes.Semver` message classes (values of those types)."""
    registry = _runtime()[0]
    return registry.quantity_class, registry.semver_class


class TypedScope:
    """The compile-time environments for the rules of one schema: one per
    CEL type of `self`, sharing one descriptor pool."""

    def __init__(self, declarations: list[DeclType | None]) -> None:
        self.registry = TypeRegistry([d for d in declarations if d is not None])
        self._envs: dict[str, cel.Env] = {}

    def env(self, declaration: DeclType | None) -> cel.Env:
        key = repr(declaration)
        if key not in self._envs:
            env = _new_env(self.registry, self.registry.cel_type(declaration))
            if declaration is not None and declaration.kind == "object" and declaration.fields:
                # cel-cpp drops a message type it cannot load without saying
                # so; then every field access fails. Say it plainly instead.
                try:
                    env.compile(f"has(self.{declaration.fields[0][0]})")
                except RuntimeError as err:
                    raise RuleCompileError(
                        f"the schema's object type could not be declared offline: {_first_line(err)}") from None
            self._envs[key] = env
        return self._envs[key]


def type_check(rule: str, schema: Mapping | None, resource_root: bool = False) -> None:
    """Compile `rule` with `self` typed from `schema`; RuleCompileError when
    the API server would refuse it. For many rules, build a TypedScope."""
    declaration = decl_type(schema, resource_root) if schema is not None else None
    _check(rule, TypedScope([declaration]).env(declaration))


def _check(rule: str, env: cel.Env) -> None:
    try:
        program = env.compile(rule)
    except RuntimeError as err:
        raise RuleCompileError(f"rule {rule!r} does not compile: {_first_line(err)}") from None
    result_type = program.return_type()
    if result_type != cel.Type.BOOL and result_type != cel.Type.DYN:
        raise RuleCompileError(f"rule {rule!r} must evaluate to a bool, not {result_type.name().lower()}")
    found = validators.problems(program.serialize())
    if found:
        raise RuleCompileError(f"rule {rule!r} does not compile: {found[0]}")


def _first_line(err: Exception) -> str:
    text = str(err)
    for prefix in ("INVALID_ARGUMENT: ",):
        text = text.removeprefix(prefix)
    return text.splitlines()[0] if text else "compile error"


class CompiledRule:
    """One compiled rule; `holds(self, oldSelf)` evaluates it.

    With `scope` and `declaration` (the type of `self` from the schema) the
    rule is type-checked as the API server checks it; without, it is
    checked with `self` dyn (all the libraries' declarations still apply)."""

    def __init__(self, rule: str, scope: TypedScope | None = None,
                 declaration: DeclType | None = None) -> None:
        self.rule = rule
        self._declaration = declaration
        if scope is not None:
            _check(rule, scope.env(declaration))
        try:
            self._program = environment().compile(rule)
        except RuntimeError as err:
            raise RuleCompileError(f"rule {rule!r} does not compile: {_first_line(err)}") from None
        result_type = self._program.return_type()
        if result_type != cel.Type.BOOL and result_type != cel.Type.DYN:
            raise RuleCompileError(f"rule {rule!r} must evaluate to a bool, not {result_type.name().lower()}")

    def evaluate(self, value: object, old_value: object = None):
        """The rule's result as a Python value (for tests of the libraries).
        Formatted strings are converted as the API server converts them
        (`values`) when the rule knows the type of `self`."""
        value, old_value = without_nul(value, old_value)  # the runtime cuts strings at a NUL
        data = {SELF: to_cel(value, self._declaration)}
        if old_value is not None:
            data[OLD_SELF] = to_cel(old_value, self._declaration)
        try:
            result = self._program.eval(data=data)
        except RuntimeError as err:
            raise RuleEvaluationError(str(err)) from None
        if result.type() == cel.Type.ERROR:
            raise RuleEvaluationError(str(result.value()))
        return result.value()

    def holds(self, value: object, old_value: object = None) -> bool:
        outcome = self.evaluate(value, old_value)
        if not isinstance(outcome, bool):
            raise RuleEvaluationError(f"the rule yielded {outcome!r}, not a bool")
        return outcome


class Expression:
    """Any CEL expression in the rule environment (not only bool ones): for
    the ported library tables."""

    def __init__(self, expression: str) -> None:
        try:
            self._program = environment().compile(expression)
        except RuntimeError as err:
            raise RuleCompileError(f"{expression!r} does not compile: {_first_line(err)}") from None

    def evaluate(self, data: Mapping | None = None):
        (data,) = without_nul(data or {})  # the runtime cuts strings at a NUL
        try:
            result = self._program.eval(data=dict(data or {}))
        except RuntimeError as err:
            raise RuleEvaluationError(str(err)) from None
        if result.type() == cel.Type.ERROR:
            raise RuleEvaluationError(str(result.value()))
        return result.value()


def quantity_value(message) -> str:
    """A `kubernetes.Quantity` result written as Kubernetes writes its value."""
    from cozyrender.kube.quantity import Quantity
    return Quantity(int(message.coefficient or "0"), message.exponent).canonical()
