"""`cozyrender gpuclass validate`: check GPUClass objects offline against the
shipped CRD, as the API server would on create or update (a thin shell over
cozyrender.gpuclass.validation)."""

from __future__ import annotations

import click

from cozyrender.commands import BadInput


@click.group("gpuclass")
def command() -> None:
    """GPUClass objects: offline validation against the shipped CRD."""


def _classes(path: str) -> list[tuple[str, dict]]:
    """(name, object) of each GPUClass in the file ("" when unnamed: the
    validator reports that)."""
    from cozyrender.gpuclass.classes import is_gpuclass
    from cozyrender.kube.shape import ShapeError, mapping, string
    from cozyrender.state import StateError, parse_documents, read_text

    source = "<stdin>" if path == "-" else path
    try:
        if path == "-":
            with click.open_file(path, encoding="utf-8") as handle:  # "-" is stdin
                text = handle.read()
        else:
            text = read_text(path)
        objects = parse_documents(text, source)
        # An object that claims another kind is refused by the CRD's identity
        # check; one that claims no kind at all is not a GPUClass attempt.
        classes = [obj for obj in objects if is_gpuclass(obj) or obj.get("kind") == "GPUClass"]
        # Metadata that is not an object cannot be decoded, let alone validated.
        named = [(string(mapping(obj, "metadata", obj), "name", obj, "metadata") or "", obj) for obj in classes]
    except UnicodeDecodeError as err:  # stdin only: files are read by read_text
        raise BadInput(f"{source}: not UTF-8 text (byte {err.start}: {err.reason})") from None
    except StateError as err:
        raise BadInput(str(err)) from None
    except ShapeError as err:
        raise BadInput(f"{source}: {err}") from None
    if not named:
        raise BadInput(f"{source}: no GPUClass object (kind: GPUClass, apiVersion: cozystack.io/...)")
    return named


@command.command("validate")
@click.argument("file", metavar="FILE")
@click.option("--old", "old_file", metavar="FILE",
              help="The stored objects: validate an update of each class of the same name "
                   "(transition rules apply); classes not found there are creates.")
@click.option("--crd", "crd_path", type=click.Path(dir_okay=False), default=None,
              help="The CRD file (default: the one shipped in charts/cozystack-basics/crds).")
def validate(file: str, old_file: str | None, crd_path: str | None) -> None:
    """Validate every GPUClass in FILE ("-" for stdin): prune unknown fields,
    apply defaults, check the schema and every CEL rule.

    Exit 0 when all are valid, 1 when one is invalid, 2 on unreadable input.
    """
    from cozyrender.gpuclass.kubecel import RuleCompileError
    from cozyrender.gpuclass.validation import CRD_PATH, CRDError, load_validator

    try:
        validator = load_validator(crd_path or CRD_PATH)
    except (CRDError, RuleCompileError) as err:
        raise BadInput(str(err)) from None
    classes = _classes(file)
    old_by_name = dict(_classes(old_file)) if old_file else {}
    invalid = 0
    for name, obj in classes:
        old = old_by_name.get(name) if name else None
        name = name or "<unnamed>"
        result = validator.validate(obj, old)
        action = "update" if old is not None else "create"
        for path in result.pruned:
            click.echo(f"gpuclass/{name}: pruned unknown field {path}")
        if result.ok:
            click.echo(f"gpuclass/{name}: valid ({action})")
            continue
        invalid += 1
        click.echo(f"gpuclass/{name}: invalid ({action}):")
        for violation in result.violations:
            click.echo(f"  {violation}")
    if invalid:
        raise SystemExit(1)
