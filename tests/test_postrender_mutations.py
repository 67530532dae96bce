"""An attacker's moves: a real tenant release (Cozystack's render at 3c780acd,
with an entitled tenant, its values Secret and a List appended) mutated at
random places with YAML's own characters (markers, indicators, BOMs, CRs,
directives, anchors, tags). Whatever comes in, the post-renderer either
refuses it in one line, or writes output that

- libyaml reads, as it reads the input (the post-renderer never passes a
  stream libyaml refuses);
- equals, object by object, what an independent model of the rules makes of
  the input as libyaml reads it;
- post-renders to itself.
"""

from __future__ import annotations

import copy
from pathlib import Path

import yaml
from hypothesis import example, given, settings
from hypothesis import strategies as st

from cozyrender.keys import in_budget_domain
from cozyrender.postrender import PostRenderError, post_render

Loader = yaml.CSafeLoader
REQUESTED, PARENT = "render.cozystack.io/vgpu-requested", "render.cozystack.io/vgpu-parent"
LABEL = "namespace.cozystack.io/vgpu"

EXTRA = b"""---
# Source: tenant/templates/namespace.yaml
apiVersion: v1
kind: Namespace
metadata:
  name: tenant-b
  labels: {a: b}
  annotations:
    render.cozystack.io/vgpu-requested: "true"
    render.cozystack.io/vgpu-parent: "true"
---
kind: Secret
metadata: {name: cozystack-values, namespace: tenant-b}
stringData:
  values.yaml: |
    _cluster:
      gpu-vgpu: false
    _namespace:
      host: b
---
kind: List
items:
- kind: ResourceQuota
  metadata: {name: q, namespace: tenant-b}
  spec:
    hard:
      ? gpuclass.cozystack.io/devices
      : 1
-
  # c
  kind: LimitRange
  metadata: {name: l, namespace: tenant-b}
"""
SEEDS = [(Path(__file__).parent / "data" / "cozystack-3c780acd" / "tenant-quota.yaml").read_bytes() + EXTRA, EXTRA]
TOKENS = [b" ", b"\t", b"\n", b"\r", b"\r\n", b"-", b".", b"#", b":", b"?", b"&a", b"*a", b"!!map", b"!!str", b"{", b"}",
          b"[", b"]", b"|", b">", b"\xef\xbb\xbf", b"%YAML 1.1\n", b"---\n", b"...\n", b"'", b'"', b"- ", b"  ", b"<<: ",
          b"~", b"x", b"tenant-", b"gpuclass.cozystack.io/devices"]


@st.composite
def mutated(draw) -> bytes:
    data = bytearray(draw(st.sampled_from(SEEDS)))
    for _ in range(draw(st.integers(1, 3))):
        at = draw(st.integers(0, len(data) - 1))
        token = draw(st.sampled_from(TOKENS))
        move = draw(st.sampled_from(["insert", "delete", "replace"]))
        if move == "insert":
            data[at:at] = token
        elif move == "delete":
            del data[at:at + draw(st.integers(1, 3))]
        else:
            data[at:at + len(token)] = token
    return bytes(data)


INHERITED = ("inherited kind",)  # marks a List item whose kind `objects` filled in


def metadata(obj: object) -> dict:
    found = obj.get("metadata") if isinstance(obj, dict) else None
    return found if isinstance(found, dict) else {}


def objects(docs: list):
    """(where, object): documents, and the items of a List in place of it (a
    document with an `items` sequence, whatever its kind, as Helm's client reads
    it; an item with neither kind nor apiVersion takes the List's kind less `List`)."""
    for i, doc in enumerate(docs):
        if isinstance(doc, dict) and isinstance(doc.get("items"), list):
            for j, item in enumerate(doc["items"]):
                if isinstance(item, dict) and INHERITED not in item and not item.get("kind") \
                        and not item.get("apiVersion") and isinstance(doc.get("kind"), str):
                    item[INHERITED] = item.get("kind", INHERITED)  # what to put back (`model`)
                    item["kind"] = doc["kind"].removesuffix("List")
                yield (i, j), item
        else:
            yield (i, None), doc


def values(text: object) -> object:
    try:
        return yaml.load(text, Loader=Loader) if isinstance(text, str) else text
    except yaml.YAMLError:
        return text


def model(docs: list) -> list:
    """The rules, written plainly over the objects libyaml reads."""
    docs = copy.deepcopy(docs)
    entitled = {}
    for _, obj in objects(docs):
        meta = metadata(obj)
        annotations, labels, name = meta.get("annotations") or {}, meta.get("labels") or {}, meta.get("name")
        if not isinstance(obj, dict) or obj.get("kind") != "Namespace":
            continue
        if REQUESTED in annotations or PARENT in annotations:
            entitled[name] = annotations.get(REQUESTED) == annotations.get(PARENT) == "true"
        elif isinstance(name, str) and (name == "tenant-root" or name.startswith("tenant-")) and LABEL not in labels \
                and ("tenant.cozystack.io/tenant-root" in labels or "namespace.cozystack.io/host" in labels):
            entitled[name] = False
    dropped, kept, gone = set(), set(), set()
    for where, obj in objects(docs):
        spec = obj.get("spec") if isinstance(obj, dict) and obj.get("kind") == "ResourceQuota" else None
        hard = spec.get("hard") if isinstance(spec, dict) else None  # a spec of another type holds no budget
        if isinstance(hard, dict):
            budget = [key for key in hard if isinstance(key, str) and in_budget_domain(key)]
            if budget and len(budget) == len(hard):
                dropped.add(metadata(obj).get("namespace"))
                gone.add(where)
            elif hard:
                kept.add(metadata(obj).get("namespace"))
            for key in budget:
                del hard[key]
    for where, obj in objects(docs):
        meta = metadata(obj)
        kind = obj.get("kind") if isinstance(obj, dict) else None
        if kind == "LimitRange" and meta.get("namespace") in dropped - kept:
            gone.add(where)
        elif kind == "Namespace" and meta.get("name") in entitled:
            annotations = meta.get("annotations")
            if isinstance(annotations, dict):
                annotations.pop(REQUESTED, None)
                annotations.pop(PARENT, None)
                if not annotations:
                    del meta["annotations"]
            if not isinstance(meta.get("labels"), dict):
                meta["labels"] = {}
            meta["labels"][LABEL] = "true" if entitled[meta.get("name")] else "false"
        elif kind == "Secret" and meta.get("name") == "cozystack-values" and meta.get("namespace") in entitled \
                and isinstance(obj.get("stringData"), dict) and "values.yaml" in obj["stringData"]:
            tenant_values = values(obj["stringData"]["values.yaml"]) or {}
            section = tenant_values.get("_namespace") or {}
            section.pop("vgpu", None)
            if entitled[meta.get("namespace")]:
                section["vgpu"] = True
            if section or "_namespace" in tenant_values:
                tenant_values["_namespace"] = section
            cluster = tenant_values.get("_cluster")
            if isinstance(cluster, dict) and "gpu-vgpu" in cluster and cluster["gpu-vgpu"] not in (True, "true"):
                del cluster["gpu-vgpu"]
            obj["stringData"]["values.yaml"] = tenant_values
    kept_docs = []
    for i, doc in enumerate(docs):
        if (i, None) in gone:
            continue
        if isinstance(doc, dict) and isinstance(doc.get("items"), list):
            for item in doc["items"]:
                if isinstance(item, dict) and INHERITED in item:
                    was = item.pop(INHERITED)
                    if was is INHERITED:
                        del item["kind"]
                    else:
                        item["kind"] = was
            doc["items"] = [item for j, item in enumerate(doc["items"]) if (i, j) not in gone]
        kept_docs.append(doc)
    return comparable(kept_docs)


def comparable(docs: list) -> list:
    for doc in docs:
        if isinstance(doc, dict) and doc.get("kind") == "Secret" and isinstance(doc.get("stringData"), dict) \
                and "values.yaml" in doc["stringData"]:
            doc["stringData"]["values.yaml"] = values(doc["stringData"]["values.yaml"])
    return docs


def test_the_seeds_are_edited():
    for seed in SEEDS:
        out = post_render(seed).output
        assert out != seed
        assert comparable([d for d in yaml.load_all(out, Loader=Loader) if d is not None]) == \
            model([d for d in yaml.load_all(seed, Loader=Loader) if d is not None])


@settings(max_examples=300, deadline=None)
@given(mutated())
# A ResourceQuota whose spec is a list (found by this test: the model read it as a mapping).
@example(data=b'---\n# Source: tenant/templates/namespace.yaml\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: tenant-b\n'
              b'  labels: {a: b}\n  annotations:\n    render.cozystack.io/vgpu-requested: "true"\n'
              b'    render.cozystack.io/vgpu-parent: "true"\n---\nkind: Secret\nmetadata: {name: cozystack-values, '
              b'namespace: tenant-b}\nstringData:\n  values.yaml: |\n    _cluster:\n      gpu-vgpu: false\n'
              b'    _namespace:\n      host: b\n---\nkind: List\nitems:\n- kind: ResourceQuota\n'
              b'  metadata: {name: q, namespace: tenant-b}\n  spec:\n  -   hard:\n      ? gpuclass.cozystack.io/devices\n'
              b'      : 1\n-\n  # c\n  kind: LimitRange\n  metadata: {name: l, namespace: tenant-b}\n')
def test_mutated_releases_are_refused_or_post_rendered_exactly(data):
    try:
        out = post_render(data).output
    except PostRenderError as err:
        assert err.message and "\n" not in err.message
        return
    read = [d for d in yaml.load_all(data, Loader=Loader) if d is not None]  # never a stream libyaml refuses
    written = [d for d in yaml.load_all(out, Loader=Loader) if d is not None]
    assert comparable(written) == model(read)
    assert post_render(out).output == out
