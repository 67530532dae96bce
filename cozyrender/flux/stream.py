"""Reading and writing a GitOps file: the kio reader and writer of `flux`.

A file in a GitOps repository holds any number of documents (a GitRepository,
several HelmReleases, a Kustomization...). It is read as a stream of documents,
cut where the post-renderer cuts Helm's output (`---` lines, `...` lines,
directives kept with their document), so that writing the documents back
reproduces the file byte for byte; an edit replaces one document's text and
nothing else (`Stream.write`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

from cozyrender.flux.errors import FluxError
from cozyrender.oserrors import describe
from cozyrender.yamlio import SafeLoader, yaml_problem

STDIN = "-"
STDIN_NAME = "<stdin>"


@dataclass(frozen=True)
class Document:
    """Characters [start, end) of the stream's text; `number` counts from 1, as users do."""

    number: int
    start: int
    end: int


@dataclass(frozen=True)
class Stream:
    """A file's text and its documents; `path` names it in messages."""

    path: str
    text: str
    documents: tuple[Document, ...]

    def text_of(self, document: Document) -> str:
        return self.text[document.start:document.end]

    def load(self, document: Document) -> object:
        """The document as data (safe YAML); an error names the file and the document."""
        try:
            return yaml.load(self.text_of(document), Loader=SafeLoader)
        except yaml.YAMLError as err:
            offset = self.text.count("\n", 0, document.start)
            raise FluxError(f"{self.path}: document {document.number} is not YAML: "
                            f"{yaml_problem(err, offset)}") from None

    def line(self, document: Document, line_in_document: int) -> int:
        """The file's 1-based line number of a 0-based line of a document."""
        return self.text.count("\n", 0, document.start) + line_in_document + 1

    def write(self, document: Document, text: str) -> str:
        """The writer: the whole file with one document's text replaced, every
        other byte as read."""
        return self.text[:document.start] + text + self.text[document.end:]


def read_text(text: str, path: str) -> Stream:
    """The reader: cut the text into documents (see the module's docstring)."""
    from cozyrender.postrender.stream import split_chunks

    data = text.encode("utf-8")
    documents: list[Document] = []
    at = 0
    for chunk in split_chunks(data):
        length = len(data[chunk.start:chunk.end].decode("utf-8"))
        documents.append(Document(chunk.number, at, at + length))
        at += length
    return Stream(path, text, tuple(documents))


def decode(data: bytes, path: str) -> str:
    """UTF-8 text with its line breaks as written (CRLF stays CRLF)."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise FluxError(f"cannot read {path}: not UTF-8 text (byte {err.start})") from None


def read_file(path: str | Path) -> Stream:
    """A file as a stream; read as bytes, so line breaks are kept as written."""
    try:
        data = Path(path).read_bytes()
    except OSError as err:
        raise FluxError(f"cannot read {path}: {describe(err)}") from None
    return read_text(decode(data, str(path)), str(path))
