"""The render's one error."""

from __future__ import annotations


class RenderError(Exception):
    """A render that Helm refuses (bad values, a `fail`, bad YAML); str() is Helm's message."""




def _message(err: BaseException) -> str:
    """Helm's message on one line (schema errors come as an indented list)."""
    return " ".join(str(err).split())

