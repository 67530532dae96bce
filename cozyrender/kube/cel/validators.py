"""The compile-time checks the API server adds to CEL's type checker for CRD
rules (k8s.io/apiserver environment/base.go at v0.35.7: cel-go's
`ValidateDurationLiterals`, `ValidateTimestampLiterals`,
`ValidateRegexLiterals` and `ValidateHomogeneousAggregateLiterals`, cel-go
v0.26.0 cel/validator.go):

* a call to `duration`, `timestamp` or `matches` whose first argument is a
  literal must evaluate (`duration('1x')`, `'a'.matches('[')` are refused);
  as in cel-go, the first argument, so the global form `matches(s, p)`
  checks `s` when `s` is the literal;
* a list or map literal must have elements (keys, values) of one type
  (`[1, 'a']` is refused), except anywhere inside a `format` call.

cel-expr-python exposes no AST, but a compiled expression serialises to a
`cel.expr.CheckedExpr`; it is read here with a small protobuf wire reader
(field numbers from cel-spec's syntax.proto and checked.proto). Literals are
checked by evaluating them in cel-cpp, the engine that evaluates the rules.
"""

from __future__ import annotations

from functools import cache

from cel_expr_python import cel

# cel.expr field numbers
_CHECKED_TYPE_MAP, _CHECKED_EXPR = 3, 4
_EXPR_ID, _EXPR_CONST, _EXPR_SELECT, _EXPR_CALL, _EXPR_LIST, _EXPR_STRUCT, _EXPR_COMPREHENSION = 2, 3, 5, 6, 7, 8, 9
_CALL_TARGET, _CALL_FUNCTION, _CALL_ARGS = 1, 2, 3
_CONST_FIELDS = {3: "int", 4: "uint", 5: "double", 6: "string", 7: "bytes", 2: "bool", 1: "null"}
_LIST_ELEMENTS, _LIST_OPTIONAL = 1, 2
_STRUCT_NAME, _STRUCT_ENTRIES = 1, 2
_ENTRY_KEY, _ENTRY_VALUE, _ENTRY_OPTIONAL = 3, 4, 5
_SELECT_OPERAND = 1
_COMPREHENSION_CHILDREN = (2, 4, 5, 6, 7)


def _fields(data: bytes) -> list[tuple[int, int, object]]:
    """(field number, wire type, value) of one message, in order."""
    out, pos = [], 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(data, pos)
        elif wire == 1:
            value, pos = data[pos:pos + 8], pos + 8
        elif wire == 2:
            length, pos = _varint(data, pos)
            value, pos = data[pos:pos + length], pos + length
        elif wire == 5:
            value, pos = data[pos:pos + 4], pos + 4
        else:
            raise ValueError(f"unexpected wire type {wire}")
        out.append((number, wire, value))
    return out


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    result, shift = 0, 0
    while True:
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7


def _first(fields, number):
    return next((value for n, _, value in fields if n == number), None)


def _all(fields, number):
    return [value for n, _, value in fields if n == number]


@cache
def _literal_checker(function: str):
    env = cel.NewEnv(variables={"v": cel.Type.DYN})
    return env.compile(f"{function}(v)" if function != "matches" else "''.matches(v)")


def _literal_is_valid(function: str, kind: str, raw: bytes | int) -> bool:
    if kind == "string":
        value: object = raw.decode("utf-8") if isinstance(raw, bytes) else raw
    elif kind == "int":
        value = raw - 2**64 if raw >= 2**63 else raw
    else:
        return True  # other literal kinds: the type checker has already spoken
    result = _literal_checker(function).eval(data={"v": value})
    return result.type() != cel.Type.ERROR


def problems(serialized: bytes) -> list[str]:
    """The API server's validator errors for a compiled expression."""
    outer = _fields(serialized)
    checked = _fields(_first(outer, 2) or b"")  # google.protobuf.Any.value
    types: dict[int, bytes] = {}
    for entry in _all(checked, _CHECKED_TYPE_MAP):
        fields = _fields(entry)
        types[_first(fields, 1) or 0] = _first(fields, 2) or b""
    found: list[str] = []
    expr = _first(checked, _CHECKED_EXPR)
    if expr is not None:
        _walk(_fields(expr), types, found, in_format=False)
    return found


def _walk(expr, types: dict[int, bytes], found: list[str], in_format: bool) -> None:
    call = _first(expr, _EXPR_CALL)
    if call is not None:
        call_fields = _fields(call)
        function = (_first(call_fields, _CALL_FUNCTION) or b"").decode()
        args = [_fields(a) for a in _all(call_fields, _CALL_ARGS)]
        if function in ("duration", "timestamp", "matches") and args:
            constant = _first(args[0], _EXPR_CONST)
            if constant is not None:
                (number, _, raw), = _fields(constant)[:1] or [(0, 0, b"")]
                if not _literal_is_valid(function, _CONST_FIELDS.get(number, ""), raw):
                    found.append(f"invalid {function} argument")
        target = _first(call_fields, _CALL_TARGET)
        children = ([_fields(target)] if target is not None else []) + args
        for child in children:
            _walk(child, types, found, in_format or function == "format")
        return
    listing = _first(expr, _EXPR_LIST)
    if listing is not None:
        list_fields = _fields(listing)
        elements = [_fields(e) for e in _all(list_fields, _LIST_ELEMENTS)]
        optional = set(_all(list_fields, _LIST_OPTIONAL))
        if not in_format:
            kinds = [types.get(_first(e, _EXPR_ID) or 0) for i, e in enumerate(elements) if i not in optional]
            if len({k for k in kinds if k is not None}) > 1:
                found.append("expected a list literal of one element type (homogeneous aggregate literals)")
        for element in elements:
            _walk(element, types, found, in_format)
        return
    structure = _first(expr, _EXPR_STRUCT)
    if structure is not None:
        struct_fields = _fields(structure)
        entries = [_fields(e) for e in _all(struct_fields, _STRUCT_ENTRIES)]
        is_map = not _first(struct_fields, _STRUCT_NAME)
        if is_map and not in_format:
            keys = {types.get(_first(_fields(_first(e, _ENTRY_KEY) or b""), _EXPR_ID) or 0) for e in entries}
            values = {types.get(_first(_fields(_first(e, _ENTRY_VALUE) or b""), _EXPR_ID) or 0)
                      for e in entries if not _first(e, _ENTRY_OPTIONAL)}
            if len(keys - {None}) > 1 or len(values - {None}) > 1:
                found.append("expected a map literal of one key and one value type (homogeneous aggregate literals)")
        for entry in entries:
            for number in (_ENTRY_KEY, _ENTRY_VALUE):
                child = _first(entry, number)
                if child is not None:
                    _walk(_fields(child), types, found, in_format)
        return
    select = _first(expr, _EXPR_SELECT)
    if select is not None:
        operand = _first(_fields(select), _SELECT_OPERAND)
        if operand is not None:
            _walk(_fields(operand), types, found, in_format)
        return
    comprehension = _first(expr, _EXPR_COMPREHENSION)
    if comprehension is not None:
        comprehension_fields = _fields(comprehension)
        for number in _COMPREHENSION_CHILDREN:
            child = _first(comprehension_fields, number)
            if child is not None:
                _walk(_fields(child), types, found, in_format)


def string_literals(serialized: bytes) -> set[str]:
    """Every string literal of a compiled expression (for DRA's attribute
    domains, `cozyrender.kube.cel.devices`)."""
    checked = _fields(_first(_fields(serialized), 2) or b"")
    found: set[str] = set()
    pending = [_first(checked, _CHECKED_EXPR)]
    while pending:
        raw = pending.pop()
        if raw is None:
            continue
        expr = _fields(raw)
        constant = _first(expr, _EXPR_CONST)
        if constant is not None:
            found.update(value.decode("utf-8", "replace") for value in _all(_fields(constant), 6))
        call = _first(expr, _EXPR_CALL)
        if call is not None:
            call_fields = _fields(call)
            pending += [_first(call_fields, _CALL_TARGET), *_all(call_fields, _CALL_ARGS)]
        listing = _first(expr, _EXPR_LIST)
        if listing is not None:
            pending += _all(_fields(listing), _LIST_ELEMENTS)
        structure = _first(expr, _EXPR_STRUCT)
        if structure is not None:
            for entry in _all(_fields(structure), _STRUCT_ENTRIES):
                entry_fields = _fields(entry)
                pending += [_first(entry_fields, _ENTRY_KEY), _first(entry_fields, _ENTRY_VALUE)]
        select = _first(expr, _EXPR_SELECT)
        if select is not None:
            pending.append(_first(_fields(select), _SELECT_OPERAND))
        comprehension = _first(expr, _EXPR_COMPREHENSION)
        if comprehension is not None:
            comprehension_fields = _fields(comprehension)
            pending += [_first(comprehension_fields, number) for number in _COMPREHENSION_CHILDREN]
    return found
