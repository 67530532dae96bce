"""The vGPU license copier's decisions (cozyrender.gpuclass.license.plan),
for any namespaces, labels, classes, sources, copies (tampered ones
included) and foreign Secrets: no copy is created or updated in a namespace
that is not entitled (its label and every ancestor's); a foreign Secret is
never named; after applying the plan every entitled namespace holds exactly
the contract's copy of each licensed class, no other namespace holds one,
and planning again finds nothing to do."""

from __future__ import annotations

import base64
import copy

from hypothesis import given, settings
from hypothesis import strategies as st

from cozyrender.entitlement import VGPU_LABEL
from cozyrender.gpuclass.license import (
    CLASS_LABEL, GRIDD_KEY, MANAGED_BY, MANAGED_BY_LABEL, TOKEN_KEY, copy_name, desired_copy, entitled,
    gridd_conf, license_of, plan,
)

NAMESPACES = ("tenant-root", "tenant-a", "tenant-a-b", "tenant-a-b-c", "tenant-z", "cozy-system", "other")


def vgpu_class(name: str, source: str, feature: int) -> dict:
    return {"apiVersion": "cozystack.io/v1alpha1", "kind": "GPUClass", "metadata": {"name": name},
            "spec": {"mode": "vgpu", "resourceName": "nvidia.com/x",
                     "license": {"secretRef": {"namespace": "cozy-system", "name": source}, "featureType": feature}}}


def secret(namespace: str, name: str, data: dict, labels: dict | None = None) -> dict:
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"namespace": namespace, "name": name, "labels": labels or {}}, "data": data}


label_values = st.sampled_from(["true", "false", None])
states = st.fixed_dictionaries({
    "labels": st.fixed_dictionaries({ns: label_values for ns in NAMESPACES}),
    "present": st.sets(st.sampled_from(NAMESPACES)),
    "classes": st.lists(st.tuples(st.sampled_from(["v1", "v2", "v3"]), st.sampled_from(["lic-a", "lic-b"]),
                                  st.sampled_from([1, 2, 4])), max_size=3, unique_by=lambda c: c[0]),
    "sources": st.dictionaries(st.sampled_from(["lic-a", "lic-b"]),
                               st.one_of(st.none(), st.binary(min_size=1, max_size=8))),
    "copies": st.lists(st.tuples(st.sampled_from(NAMESPACES), st.sampled_from(["v1", "v2", "v3"]),
                                 st.sampled_from(["fresh", "tampered", "stale"])), max_size=8),
    "foreign": st.sets(st.tuples(st.sampled_from(NAMESPACES), st.sampled_from(["v1", "v2", "v3"]))),
})


def _world(s):
    labels = {ns: ({VGPU_LABEL: s["labels"][ns]} if s["labels"][ns] else {}) for ns in NAMESPACES
              if ns in s["present"]}
    classes = [vgpu_class(*c) for c in s["classes"]]
    sources = {}
    for name, token in s["sources"].items():
        sources[("cozy-system", name)] = None if token is None else secret(
            "cozy-system", name, {TOKEN_KEY: base64.b64encode(token).decode()})
    copies = {}
    for namespace, gpu_class, how in s["copies"]:
        data = {TOKEN_KEY: base64.b64encode(b"old").decode(), GRIDD_KEY: "eA=="}
        body = secret(namespace, copy_name(gpu_class), data, {MANAGED_BY_LABEL: MANAGED_BY, CLASS_LABEL: gpu_class})
        if how == "tampered":
            body["data"][TOKEN_KEY] = base64.b64encode(b"mine now").decode()
        copies[(namespace, copy_name(gpu_class))] = body
    foreign = {(ns, copy_name(c)) for ns, c in s["foreign"]} - set(copies)
    return labels, classes, sources, copies, foreign


def _apply(todo, copies):
    copies = dict(copies)
    for key in todo.delete:
        del copies[key]
    for body in todo.create + todo.update:
        copies[(body["metadata"]["namespace"], body["metadata"]["name"])] = copy.deepcopy(body)
    return copies


@settings(max_examples=400, deadline=None)
@given(states)
def test_the_plan_keeps_the_contract(s):
    labels, classes, sources, copies, foreign = _world(s)
    todo = plan(classes, sources, labels, copies, foreign)
    for body in todo.create + todo.update:
        key = (body["metadata"]["namespace"], body["metadata"]["name"])
        assert entitled(key[0], labels), key
        assert key not in foreign, key
    assert not set(todo.delete) & foreign
    after = _apply(todo, copies)
    assert not plan(classes, sources, labels, after, foreign)  # a fixed point
    for namespace in labels:
        for gpuclass in classes:
            source = license_of(gpuclass)
            key = (namespace, copy_name(source.gpu_class))
            stored = sources.get(("cozy-system", source.name))
            if key in foreign:
                assert key not in after
            elif entitled(namespace, labels) and stored is not None:
                assert after[key] == desired_copy(source, stored["data"][TOKEN_KEY], namespace)
            else:
                assert key not in after, key
    licensed = {copy_name(license_of(c).gpu_class) for c in classes}
    assert all(name in licensed and entitled(ns, labels) for ns, name in after)


def test_entitlement_is_the_chain():
    labels = {"tenant-root": {VGPU_LABEL: "true"}, "tenant-a": {VGPU_LABEL: "true"},
              "tenant-a-b": {VGPU_LABEL: "true"}, "other": {VGPU_LABEL: "true"}}
    assert entitled("tenant-a-b", labels) and entitled("other", labels)
    labels["tenant-root"] = {VGPU_LABEL: "false"}
    assert not entitled("tenant-a-b", labels) and not entitled("tenant-a", labels)
    assert entitled("other", labels)  # not a tenant namespace: its own label alone
    assert not entitled("tenant-x", labels)  # not there: not entitled


def test_the_contract_spelled_out():
    source = license_of(vgpu_class("a100-4c", "nls", 4))
    body = desired_copy(source, base64.b64encode(b"TOKEN").decode(), "tenant-a")
    assert body["metadata"]["name"] == "vgpu-license-a100-4c"
    assert body["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "cozyrender-license-copier",
                                          "gpuclass.cozystack.io/class": "a100-4c"}
    # The keys NVIDIA's guest driver and the GPU Operator's licensing configuration read.
    assert sorted(body["data"]) == ["client_configuration_token.tok", "gridd.conf"]
    assert base64.b64decode(body["data"]["client_configuration_token.tok"]) == b"TOKEN"
    assert "FeatureType=4\n" in base64.b64decode(body["data"]["gridd.conf"]).decode()
    assert gridd_conf(1).endswith("FeatureType=1\n")


def test_a_source_without_a_token_keeps_the_copies_and_says_why():
    classes = [vgpu_class("v1", "lic-a", 1)]
    labels = {"tenant-root": {VGPU_LABEL: "true"}}
    current = {("tenant-root", "vgpu-license-v1"): secret("tenant-root", "vgpu-license-v1", {TOKEN_KEY: "b2xk"},
                                                          {MANAGED_BY_LABEL: MANAGED_BY, CLASS_LABEL: "v1"})}
    todo = plan(classes, {("cozy-system", "lic-a"): secret("cozy-system", "lic-a", {"other": "eA=="})}, labels, current)
    assert not todo and "has no 'token' key" in todo.problems[0]
    gone = plan(classes, {("cozy-system", "lic-a"): None}, labels, current)
    assert gone.delete == [("tenant-root", "vgpu-license-v1")]  # the source deleted: revoked
