"""Kubernetes' CEL lists library (`kubernetes.lists`, k8s.io/apiserver
pkg/cel/library/lists.go at v0.35.7), declared with the API server's
overload ids and element types:

    <list(T)>.isSorted() -> bool     T comparable: int uint double bool duration timestamp string bytes
    <list(T)>.sum() -> T             T summable: int uint double duration (0 for an empty list)
    <list(T)>.min() -> T, .max() -> T   T comparable ("min called on empty list")
    <list(A)>.indexOf(A) -> int, .lastIndexOf(A) -> int

The API server declares indexOf/lastIndexOf for any element type A; here A
is one of the comparable scalar types, so a rule calling them on a list of
objects, lists or maps is refused offline (a false refusal, never a false
admission). One implementation serves every element type (see
`overloads`): a sum of ints is checked against the int64 range (uint sums
too); an empty list sums to 0 (0.0 for doubles).
"""

from __future__ import annotations

from cel_expr_python import cel

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def _types() -> tuple[list[tuple[str, cel.Type]], list[tuple[str, cel.Type]]]:
    T = cel.Type
    comparable = [("int", T.INT), ("uint", T.UINT), ("double", T.DOUBLE), ("bool", T.BOOL),
                  ("duration", T.DURATION), ("timestamp", T.TIMESTAMP), ("string", T.STRING), ("bytes", T.BYTES)]
    summable = [("int", T.INT), ("uint", T.UINT), ("double", T.DOUBLE), ("duration", T.DURATION)]
    return comparable, summable


def _equal(a, b) -> bool:
    """CEL equality between two plain values (a bool is never a number)."""
    if isinstance(a, bool) != isinstance(b, bool):
        return False
    return a == b


def is_sorted(items) -> bool:
    items = list(items)
    return all(not items[i] > items[i + 1] for i in range(len(items) - 1))


def sum_(items):
    items = list(items)
    if not items:
        return 0  # the element type is not known here; 0 compares equal to 0u and 0.0
    total = items[0]
    for item in items[1:]:
        total = total + item
        if isinstance(total, int) and not _INT64_MIN <= total <= _INT64_MAX:
            raise ValueError("integer overflow")
    return total


def _extreme(name: str, prefer_later):
    def run(items):
        items = list(items)
        if not items:
            raise ValueError(f"{name} called on empty list")
        result = items[0]
        for item in items[1:]:
            if prefer_later(result, item):
                result = item
        return result
    return run


def index_of(items, item) -> int:
    for index, value in enumerate(items):
        if _equal(value, item):
            return index
    return -1


def last_index_of(items, item) -> int:
    items = list(items)
    for index in range(len(items) - 1, -1, -1):
        if _equal(items[index], item):
            return index
    return -1


NEVER_TYPE = "cozyrender.Never"  # a message no value has: see overloads()


def overloads() -> dict[str, list[tuple]]:
    """name -> [(overload id, return type, parameters, is_member, impl or None)].

    cel-expr-python dispatches on runtime kinds, where every list looks
    alike, and converts a Python result by the return type of the overload
    that carries the implementation. So sum/min/max carry theirs on an
    extra overload over `list(cozyrender.Never)` returning dyn, which no
    expression can select when type-checked; the declared overloads the
    checker picks carry none. isSorted returns bool whatever the elements,
    so its first overload carries it. A dyn result cannot be a duration or a
    timestamp there: min/max/sum over those type-check as on the API server
    but fail when evaluated offline (the rule is reported, never admitted)."""
    T = cel.Type
    comparable, summable = _types()
    never = T.List(T(NEVER_TYPE))

    def declared(types, make_id, ret):
        return [(make_id(name), ret(t), [T.List(t)], True, None) for name, t in types]

    sorted_overloads = declared(comparable, lambda n: f"list_{n}_is_sorted_bool", lambda t: T.BOOL)
    sorted_overloads[0] = sorted_overloads[0][:4] + (is_sorted,)
    return {
        "isSorted": sorted_overloads,
        "sum": [("cozyrender_list_sum", T.DYN, [never], True, sum_)]
        + declared(summable, lambda n: f"list_{n}_sum_{n}", lambda t: t),
        "max": [("cozyrender_list_max", T.DYN, [never], True, _extreme("max", lambda best, item: item > best))]
        + declared(comparable, lambda n: f"list_{n}_max_{n}", lambda t: t),
        "min": [("cozyrender_list_min", T.DYN, [never], True, _extreme("min", lambda best, item: item < best))]
        + declared(comparable, lambda n: f"list_{n}_min_{n}", lambda t: t),
        # (list, A): the second argument's kind tells the overloads apart at
        # run time, so each carries the implementation.
        "indexOf": [(f"list_{n}_index_of_int", T.INT, [T.List(t), t], True, index_of) for n, t in comparable],
        "lastIndexOf": [(f"list_{n}_last_index_of_int", T.INT, [T.List(t), t], True, last_index_of)
                        for n, t in comparable],
    }


# -- cel-go's sets extension (ext.Sets, cel-go v0.26.0) ---------------------------------------
# sets.contains(list(T), list(T)): every element of the second is in the first;
# sets.equivalent: each contains the other; sets.intersects: one element in common.
# cel-go declares them for any T; here T is a scalar type (as for indexOf above).

def sets_contains(items, sub) -> bool:
    items = list(items)
    return all(any(_equal(value, wanted) for value in items) for wanted in sub)


def sets_equivalent(a, b) -> bool:
    return sets_contains(a, b) and sets_contains(b, a)


def sets_intersects(a, b) -> bool:
    b = list(b)
    return any(any(_equal(value, other) for other in b) for value in a)


def sets_overloads() -> dict[str, list[tuple]]:
    T = cel.Type
    comparable, _ = _types()

    def declared(function: str, oid: str, impl) -> list[tuple]:
        # (list, list) at run time whatever T is: the first overload carries the implementation.
        return [(f"{oid}_{name}", T.BOOL, [T.List(t), T.List(t)], False, impl if i == 0 else None)
                for i, (name, t) in enumerate(comparable)]

    return {
        "sets.contains": declared("sets.contains", "list_sets_contains_list", sets_contains),
        "sets.equivalent": declared("sets.equivalent", "list_sets_equivalent_list", sets_equivalent),
        "sets.intersects": declared("sets.intersects", "list_sets_intersects_list", sets_intersects),
    }
