"""`cozyrender gpuclass validate`: check GPUClass objects offline against the
shipped CRD, as the API server would on create or update (a thin shell over
cozyrender.gpuclass.validation)."""

from __future__ import annotations

import os
from pathlib import Path

import click

from cozyrender.commands import (
    emit,
    examples,
    expand_paths,
    fail,
    output_option,
    read_text,
    source_name,
)


@click.group("gpuclass", epilog=examples(
    "cozyrender gpuclass validate class.yaml",
    "kubectl get gpuclass a100-4c -o yaml | cozyrender gpuclass validate -"))
def command() -> None:
    """GPUClass objects: offline validation against the shipped CRD."""


def _classes(paths: tuple[str, ...] | list[str]) -> list[tuple[str, str, dict]]:
    """(source, name, object) of each GPUClass in the files and folders named
    ("" when unnamed: the validator reports that)."""
    from cozyrender.gpuclass.classes import is_gpuclass
    from cozyrender.kube.shape import ShapeError, mapping, string
    from cozyrender.state import StateError, parse_documents

    found = []
    files = expand_paths(paths)
    for path in files:
        source = source_name(path)
        try:
            objects = parse_documents(read_text(path), source)
            # An object that claims another kind is refused by the CRD's identity
            # check; one that claims no kind at all is not a GPUClass attempt.
            classes = [obj for obj in objects if is_gpuclass(obj) or obj.get("kind") == "GPUClass"]
            # Metadata that is not an object cannot be decoded, let alone validated.
            found.extend((source, string(mapping(obj, "metadata", obj), "name", obj, "metadata") or "", obj)
                         for obj in classes)
        except StateError as err:
            fail(str(err))
        except ShapeError as err:
            fail(f"{source}: {err}")
    if not found:
        where = source_name(paths[0]) if len(paths) == 1 and len(files) <= 1 else ", ".join(paths)
        fail(f"{where}: no GPUClass object (kind: GPUClass, apiVersion: cozystack.io/...)")
    return found


@command.command("validate", short_help="Validate GPUClass objects in files, folders or standard input.", epilog=examples(
    "cozyrender gpuclass validate class.yaml                   # a create",
    "cozyrender gpuclass validate class.yaml --old stored.yaml  # an update of the class of that name",
    "cozyrender gpuclass validate gitops/gpuclasses/ -o json    # every class in a folder",
    "kubectl get gpuclass a100-4c -o yaml | cozyrender gpuclass validate -"))
@click.argument("files", nargs=-1, required=True, metavar="FILE|DIR...")
@click.option("--old", "old_files", multiple=True, metavar="FILE|DIR",
              help="The stored objects: validate an update of each class of the same name "
                   "(transition rules apply); classes not found there are creates. Repeatable.")
@click.option("--crd", "crd_path", metavar="FILE", default=None,
              help="The CRD file, '-' for standard input (default: the one shipped with cozyrender, "
                   "charts/cozystack-basics/crds/gpuclasses.cozystack.io.yaml).")
@output_option("table", "json", "yaml")
def validate(files: tuple[str, ...], old_files: tuple[str, ...], crd_path: str | None, output: str) -> None:
    """Validate every GPUClass in FILE ("-" for stdin; a folder for the YAML/JSON
    files in it): prune unknown fields, apply defaults, check the schema and
    every CEL rule.

    Exit 0 when all are valid, 1 when one is invalid, 2 on unreadable input.
    """
    from cozyrender.gpuclass.validation import CRD_PATH, CRDError, load_validator
    from cozyrender.kube.cel.environment import RuleCompileError
    from cozyrender.kube.shape import ShapeError

    try:
        if crd_path == "-":  # the validator is compiled from a file: stdin goes through one
            import tempfile

            with tempfile.TemporaryDirectory(prefix="cozyrender-") as folder:
                crd_file = f"{folder}/crd.yaml"
                with open(crd_file, "w", encoding="utf-8") as handle:
                    handle.write(read_text("-"))
                try:
                    validator = load_validator(crd_file)
                except CRDError as err:
                    fail(str(err).replace(str(Path(crd_file).resolve()), "<stdin>"))
        elif crd_path and os.path.isdir(crd_path):
            fail(f"{crd_path}: is a folder, not a file")
        elif crd_path and not os.path.isfile(crd_path):
            fail(f"{crd_path}: no such file")
        else:
            validator = load_validator(crd_path or CRD_PATH)
    except (CRDError, RuleCompileError) as err:
        fail(str(err))
    classes = _classes(files)
    old_by_name = {name: (source, obj) for source, name, obj in _classes(old_files)} if old_files else {}
    invalid = 0
    items = []
    for source, name, obj in classes:
        old_source, old = old_by_name.get(name, (None, None)) if name else (None, None)
        try:
            result = validator.validate(obj, old)
        except ShapeError as err:  # an object the API server's decoder would refuse, named with its file
            fail(f"{old_source if err.obj is old and old is not None else source}: {err}")
        invalid += not result.ok
        items.append({
            "name": name or None, "source": source, "action": "update" if old is not None else "create",
            "valid": result.ok, "pruned": list(result.pruned),
            "violations": [{"field": v.path, "message": v.message} for v in result.violations],
            "_lines": [str(v) for v in result.violations],
        })
    if output in ("json", "yaml"):
        emit({"valid": not invalid,
              "classes": [{k: v for k, v in item.items() if not k.startswith("_")} for item in items]},
             output)
    else:
        for item in items:
            shown = f"gpuclass/{item['name'] or '<unnamed>'}"
            for path in item["pruned"]:
                click.echo(f"{shown}: pruned unknown field {path}")
            if item["valid"]:
                click.echo(f"{shown}: valid ({item['action']})")
                continue
            click.echo(f"{shown}: invalid ({item['action']}):")
            for line in item["_lines"]:
                click.echo(f"  {line}")
    if invalid:
        raise SystemExit(1)
