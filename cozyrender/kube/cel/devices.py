"""DRA device selectors: a DeviceClass's `spec.selectors[].cel.expression`
evaluated against one device of a ResourceSlice, as the scheduler's
allocator does (k8s.io/dynamic-resource-allocation cel/compile.go at
v0.35.4), on cel-expr-python (cel-cpp) with the same Kubernetes libraries
as CRD rules (`environment`).

The one variable is `device`:

* `device.driver`: the slice's driver;
* `device.attributes[domain][name]`: each attribute by its qualified name
  (an unqualified name is in the driver's domain), its value an int, bool,
  string or semantic version (`semver` values);
* `device.capacity[domain][name]`: each capacity's value as a quantity;
* `device.allowMultipleAllocations`: the device's field, false when unset.

As in Kubernetes, a domain the device has nothing in reads as an empty map
(`device.attributes["other.io"].model` is "no such key", `has(...)` is
false). Kubernetes returns that empty map for any key it is asked for;
here each string literal of the expression is given one, so the answer is
the same for every expression that names its domains literally; a domain
computed at run time, or `in`/`size`/iteration over `device.attributes`
itself when one of the literals is not a domain of the device, may differ.

A selector must yield a bool; one that does not compile (or uses a
library this environment does not register: `environment`'s list) is a
`SelectorError` at compile time; a run-time error (a missing attribute, an
attribute value of no supported kind) is a `SelectorError` from
`matches`: for the allocator the device cannot be allocated through the
class. Not reproduced: the allocator's CEL cost limit. Pure, no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping

from cel_expr_python import cel

from cozyrender.kube import quantity as q
from cozyrender.kube.cel import semver, validators
from cozyrender.kube.cel.environment import _first_line, message_classes, variables_environment

DEVICE = "device"


class SelectorError(ValueError):
    """A selector that does not compile, or failed on one device."""


def _domain(name: str, driver: str) -> tuple[str, str]:
    domain, sep, rest = name.partition("/")
    return (domain, rest) if sep else (driver, name)


def _attribute(value: object) -> object:
    if not isinstance(value, Mapping) or len(value) != 1:
        raise SelectorError(f"attribute value {value!r}: exactly one of int, bool, string, version")
    (kind, raw), = value.items()
    if kind == "int" and isinstance(raw, int) and not isinstance(raw, bool):
        return raw
    if kind == "bool" and isinstance(raw, bool):
        return raw
    if kind == "string" and isinstance(raw, str):
        return raw
    if kind == "version" and isinstance(raw, str):
        try:
            version = semver.parse(raw)
        except ValueError as err:
            raise SelectorError(f"attribute version {raw!r}: {err}") from None
        return message_classes()[1](text=semver.spell(version))
    raise SelectorError(f"attribute value {value!r}: unsupported")


def _quantity(value: object):
    raw = value.get("value") if isinstance(value, Mapping) else None
    try:
        coefficient, exponent = q.parse(str(raw)).normalized()
    except q.InvalidQuantity as err:
        raise SelectorError(f"capacity {value!r}: {err}") from None
    return message_classes()[0](coefficient=str(coefficient), exponent=exponent)


def device_value(driver: str, device: Mapping, domains: frozenset[str] = frozenset()) -> dict:
    """The `device` variable for one device of a slice of `driver`; every
    name in `domains` the device has nothing in reads as an empty map."""
    attributes: dict[str, dict] = {domain: {} for domain in domains}
    capacity: dict[str, dict] = {domain: {} for domain in domains}
    for name, value in (device.get("attributes") or {}).items():
        domain, key = _domain(name, driver)
        attributes.setdefault(domain, {})[key] = _attribute(value)
    for name, value in (device.get("capacity") or {}).items():
        domain, key = _domain(name, driver)
        capacity.setdefault(domain, {})[key] = _quantity(value)
    return {"driver": driver, "attributes": attributes, "capacity": capacity,
            "allowMultipleAllocations": bool(device.get("allowMultipleAllocations") or False)}


class DeviceSelector:
    """One compiled selector expression; `matches(driver, device)`."""

    def __init__(self, expression: str) -> None:
        self.expression = expression
        try:
            self._program = variables_environment(DEVICE).compile(expression)
        except RuntimeError as err:
            raise SelectorError(f"selector {expression!r} does not compile: {_first_line(err)}") from None
        kind = self._program.return_type()
        if kind != cel.Type.BOOL and kind != cel.Type.DYN:
            raise SelectorError(f"selector {expression!r} must evaluate to a bool, not {kind.name().lower()}")
        self._domains = frozenset(validators.string_literals(self._program.serialize()))

    def matches(self, driver: str, device: Mapping) -> bool:
        value = device_value(driver, device, self._domains)
        try:
            result = self._program.eval(data={DEVICE: value})
        except RuntimeError as err:
            raise SelectorError(f"selector {self.expression!r}: {_first_line(err)}") from None
        if result.type() == cel.Type.ERROR:
            raise SelectorError(f"selector {self.expression!r}: {result.value()}")
        outcome = result.value()
        if not isinstance(outcome, bool):
            raise SelectorError(f"selector {self.expression!r} yielded {outcome!r}, not a bool")
        return outcome
