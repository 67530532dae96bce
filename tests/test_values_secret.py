"""Reading a tenant's `cozystack-values` Secret."""

from __future__ import annotations

import base64

import pytest

from cozyrender.values_secret import ValuesSecretError, decode, encode, is_values_secret, read_values, values_text

TEXT = "_cluster:\n  gpu-vgpu: true\n_namespace:\n  host: a.example.org\n"


def secret(**fields):
    return {"kind": "Secret", "metadata": {"name": "cozystack-values", "namespace": "tenant-a"}, **fields}


def test_string_data_and_base64_data_read_the_same():
    plain = secret(stringData={"values.yaml": TEXT})
    encoded = secret(data={"values.yaml": base64.b64encode(TEXT.encode()).decode()})
    assert read_values(plain) == read_values(encoded) == {"_cluster": {"gpu-vgpu": True}, "_namespace": {"host": "a.example.org"}}


def test_string_data_wins_as_the_api_server_merges():
    both = secret(stringData={"values.yaml": "a: 1\n"}, data={"values.yaml": encode("a: 2\n")})
    assert read_values(both) == {"a": 1}


def test_no_values_and_empty_values():
    assert values_text(secret()) is None
    assert read_values(secret()) == {}
    assert read_values(secret(stringData={"values.yaml": ""})) == {}


@pytest.mark.parametrize(
    "fields",
    [{"data": {"values.yaml": "!!!"}}, {"data": {"values.yaml": encode("x") + "="}},
     {"stringData": {"values.yaml": "a: ["}}, {"stringData": {"values.yaml": "- a\n"}}, {"stringData": {"values.yaml": 3}}],
)
def test_unreadable_values_are_errors(fields):
    with pytest.raises(ValuesSecretError):
        read_values(secret(**fields))


def test_round_trip_and_identity():
    assert decode(encode("é: ü\n")) == "é: ü\n"
    assert is_values_secret(secret(), "tenant-a") and not is_values_secret(secret(), "tenant-b")
    assert not is_values_secret({"kind": "ConfigMap", "metadata": {"name": "cozystack-values"}})
