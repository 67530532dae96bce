"""The post-renderer's one kind of user error."""

from __future__ import annotations


class PostRenderError(Exception):
    """Bad input. str() is one line naming the document and the problem."""

    def __init__(self, problem: str, document: int | None = None, source: str | None = None) -> None:
        self.problem = problem
        self.document = document
        self.source = source
        super().__init__(self.message)

    @property
    def message(self) -> str:
        """One line, whatever the names in it hold."""
        where = ""
        if self.document is not None:
            where = f"document {self.document}"
            if self.source:
                where += f" ({self.source})"
            where += ": "
        return (where + self.problem).replace("\r", "\\r").replace("\n", "\\n")


class EditError(ValueError):
    """A document whose shape a rule cannot edit safely; becomes a PostRenderError."""
