"""Loading the Kubernetes test tables ported as data under tests/data/k8s/."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import yaml

DATA = Path(__file__).resolve().parent / "data" / "k8s"


def load(name: str) -> dict:
    with open(DATA / name, encoding="utf-8") as stream:
        return yaml.safe_load(stream)


def fraction(text: str) -> Fraction:
    return Fraction(text)


def row_id(row: object) -> str:
    text = str(row)
    return text if len(text) <= 60 else text[:57] + "..."
