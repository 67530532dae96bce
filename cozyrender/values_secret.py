"""The `cozystack-values` Secret: a tenant's values as its apps and its
sub-tenants read them (Flux `valuesFrom`), in `values.yaml` under `stringData`
or base64 `data`. The single reader every command uses; the post-renderer
edits the same key in place.
"""

from __future__ import annotations

import binascii
from collections.abc import Mapping

SECRET_NAME = "cozystack-values"
VALUES_KEY = "values.yaml"


class ValuesSecretError(ValueError):
    """A values Secret whose values.yaml cannot be read."""


def is_values_secret(obj: Mapping, namespace: str | None = None) -> bool:
    metadata = obj.get("metadata") if isinstance(obj.get("metadata"), Mapping) else {}
    return (
        obj.get("kind") == "Secret"
        and metadata.get("name") == SECRET_NAME
        and (namespace is None or metadata.get("namespace") == namespace)
    )


def values_text(secret: Mapping) -> str | None:
    """The text of values.yaml; `stringData` wins over `data`, as the API server merges them."""
    text = (secret.get("stringData") or {}).get(VALUES_KEY)
    if text is not None:
        if not isinstance(text, str):
            raise ValuesSecretError(f"stringData.{VALUES_KEY} is not a string")
        return text
    encoded = (secret.get("data") or {}).get(VALUES_KEY)
    return None if encoded is None else decode(str(encoded))


def decode(encoded: str) -> str:
    """`data.values.yaml` as text (strict base64, UTF-8)."""
    # Line breaks are allowed inside (the API server's base64 decoder skips them).
    compact = encoded.replace("\r", "").replace("\n", "")
    try:
        return binascii.a2b_base64(compact.encode("ascii"), strict_mode=True).decode("utf-8")
    except (binascii.Error, UnicodeError):
        raise ValuesSecretError(f"data.{VALUES_KEY} is not base64-encoded UTF-8") from None


def encode(text: str) -> str:
    """Text as `data.values.yaml` holds it."""
    return binascii.b2a_base64(text.encode("utf-8"), newline=False).decode("ascii")


def read_values(secret: Mapping) -> dict:
    """The values mapping (empty when the Secret holds none)."""
    import yaml

    text = values_text(secret)
    try:
        values = yaml.safe_load(text or "") or {}
    except yaml.YAMLError as err:
        raise ValuesSecretError(f"{VALUES_KEY} is not YAML: {' '.join(str(err).split())}") from None
    if not isinstance(values, dict):
        raise ValuesSecretError(f"{VALUES_KEY} is not a mapping")
    return values
