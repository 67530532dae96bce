"""The user values of a render as `helm template` computes them: `-f` files,
then `--set-json`, `--set`, `--set-string`, `--set-file`, each parsed by Helm's
own strvals parser (through the SDK) into the values so far."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from cozyrender.render.errors import RenderError, _message
from cozyrender.oserrors import describe
from cozyrender.yamlio import JSONProblem, check_keys, loads_json, yaml_problem


def merge_values(base: dict[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """Helm's merge of successive `-f` files: maps merge, anything else is replaced."""
    out = dict(base)
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = merge_values(dict(out[key]), value)
        else:
            out[key] = value
    return out


_SET_FLAGS = {"json": "--set-json", "set": "--set", "string": "--set-string",
              "file": "--set-file"}
# Stands for "the value already there" in the expression that replays the
# current values before a --set expression (see _parse_into).
_KEEP = "cozyrender-keep-7c1e5a0b9d"
_KEY_SPECIALS = frozenset("\\.,=[]{}")


def load_values(
    files: Sequence[str | Path] = (),
    sets: Sequence[str] = (),
    inline: Sequence[Mapping[str, Any]] = (),
    *,
    set_json: Sequence[str] = (),
    set_string: Sequence[str] = (),
    set_file: Sequence[str] = (),
    read: Callable[[str], str] | None = None,
) -> dict[str, Any]:
    """The user values of a render as `helm template` computes them: `-f` files
    in order, then inline layers, then `--set-json`, `--set`, `--set-string` and
    `--set-file` (Helm's order), each parsed by Helm's own strvals parser into the
    values so far (so `--set a[1]=x` changes one item of an existing list).
    `read` reads a values file (the commands pass one that takes `-` for stdin)."""
    import helm_python as helm

    values: dict[str, Any] = {}
    for path in files:
        if read is not None:
            text = read(str(path))
        else:
            try:
                text = Path(path).read_text(encoding="utf-8")
            except FileNotFoundError:
                raise RenderError(f"values file {path}: no such file") from None
            except OSError as err:
                raise RenderError(f"values file {path}: {describe(err)}") from None
            except UnicodeDecodeError as err:
                raise RenderError(f"values file {path}: not UTF-8 text (byte {err.start})") from None
        try:  # Helm keeps the last of two keys silently; cozyrender refuses (cozyrender.yamlio)
            check_keys(text)
        except yaml.YAMLError as err:
            raise RenderError(f"failed to parse {path}: {yaml_problem(err)}") from None
        try:
            layer = helm.values_from_yaml(text) if text.strip() else {}
            values = merge_values(values, layer or {})
        except helm.HelmError as err:
            raise RenderError(f"failed to parse {path}: {_message(err)}") from None
        except RecursionError:  # hundreds of levels: past Python's stack, so past any chart's values
            raise RenderError(f"failed to parse {path}: nested too deeply") from None
    for layer in inline:
        values = merge_values(values, layer)
    for expression in set_json:
        trimmed = expression.strip()
        if trimmed.startswith("{"):  # Helm 4: a whole JSON object, merged like a file
            try:
                layer = loads_json(trimmed)
            except JSONProblem as err:  # a key twice, a number too long: said, not guessed
                raise RenderError(f"failed parsing --set-json data JSON: {err}") from None
            except ValueError:
                layer = None
            if not isinstance(layer, dict):
                raise RenderError(f"failed parsing --set-json data JSON: {expression}")
            values = merge_values(values, layer)
        else:
            values = _parse_into(values, expression, "json")
    for expression in sets:
        values = _parse_into(values, expression, "set")
    for expression in set_string:
        values = _parse_into(values, expression, "string")
    for expression in set_file:
        values = _parse_into(values, expression, "file")
    return values


def _escape_key(key: str) -> str:
    return "".join("\\" + c if c in _KEY_SPECIALS else c for c in key)


def _replay(value: Any, path: str, out: list[str], in_list: bool) -> None:
    """Assignments `path=KEEP` that rebuild the shape of `value`: what Helm's
    ParseInto finds in place. Empty maps and lists under a map key are left to the
    merge afterwards (strvals treats a missing key and an empty one alike there)."""
    if isinstance(value, Mapping) and value:
        for key, item in value.items():
            if not isinstance(key, str) or key == "":
                raise ValueError("a key strvals cannot name")
            _replay(item, f"{path}.{_escape_key(key)}" if path else _escape_key(key), out, False)
    elif isinstance(value, list) and value:
        for i, item in enumerate(value):
            _replay(item, f"{path}[{i}]", out, True)
    elif in_list or not isinstance(value, (Mapping, list)):
        out.append(path)


def _restore(parsed: Any, base: Any) -> Any:
    """`parsed` with every KEEP marker replaced by the value at the same place in `base`."""
    if isinstance(parsed, str) and parsed == _KEEP:
        return base
    if isinstance(parsed, dict):
        base = base if isinstance(base, Mapping) else {}
        return {k: _restore(v, base.get(k)) for k, v in parsed.items()}
    if isinstance(parsed, list):
        base = base if isinstance(base, list) else []
        return [_restore(v, base[i] if i < len(base) else None) for i, v in enumerate(parsed)]
    return parsed


def _parse_into(values: dict[str, Any], expression: str, kind: str) -> dict[str, Any]:
    """Helm's strvals.ParseInto(expression, values) for one --set flavour, with the
    SDK's parser: the current values are replayed as KEEP markers before the
    expression, so the parser sees (and indexes into) the same lists and types."""
    import helm_python as helm

    parse = {"json": helm.parse_set_json, "set": helm.parse_set_string,
             "string": helm.parse_set_string_values, "file": helm.parse_set_file}[kind]
    flag = _SET_FLAGS[kind]
    try:
        paths: list[str] = []
        _replay(values, "", paths, False)
    except ValueError:
        paths = []  # keys strvals cannot express: plain merge
    if not paths:
        return merge_values(values, _parse(parse, expression, flag))
    with tempfile.TemporaryDirectory(prefix="cozyrender-") as tmp:
        if kind == "file":
            keep = Path(tmp) / "keep"
            keep.write_text(_KEEP, encoding="utf-8")
            marker = _escape_key(str(keep))
        else:
            marker = json.dumps(_KEEP) if kind == "json" else _KEEP
        replay = ",".join(f"{p}={marker}" for p in paths)
        try:
            parsed = parse(f"{replay},{expression}")
        except helm.HelmError as err:
            _parse(parse, expression, flag)  # the expression's own error, if it has one
            raise RenderError(f"failed parsing {flag} data: {_message(err)}") from None
    return merge_values(values, _restore(parsed, values))


def _parse(parse: Callable[[str], dict[str, Any]], expression: str, flag: str
           ) -> dict[str, Any]:
    import helm_python as helm

    try:
        return parse(expression)
    except helm.HelmError as err:
        raise RenderError(f"failed parsing {flag} data: {_message(err)}") from None
