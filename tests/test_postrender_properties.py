"""Properties of the post-renderer over generated streams (hypothesis).

- no ResourceQuota in the output holds a key in the budget domain;
- no namespace is labelled "true" unless both render inputs are "true";
- documents the rules do not change come out byte for byte;
- post-rendering the output again changes nothing;
- the output objects are what a plain model of the rules says.
"""

from __future__ import annotations

import json

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from cozyrender.keys import in_budget_domain
from cozyrender.postrender import post_render
from cozyrender.postrender.stream import split_chunks

NAMESPACES = ["tenant-a", "tenant-b", "tenant-a-c"]
ORDINARY = ["cpu", "requests.cpu", "limits.memory", "pods", "nvidia.com/gpu", "requests.nvidia.com/gpu",
            "evilgpuclass.cozystack.io/devices", "gpuclass.cozystack.io.example.com/devices", "a~b/c"]
BUDGET = ["gpuclass.cozystack.io/devices", "a100.gpuclass.cozystack.io/devices",
          "requests.a100.gpuclass.cozystack.io/devices", "limits.gpuclass.cozystack.io/devices",
          "x.y.gpuclass.cozystack.io/memory", "H100.GPUCLASS.cozystack.io/devices", "a~1.gpuclass.cozystack.io/d/x"]
FLAGS = st.sampled_from(["true", "false"])


@st.composite
def quota(draw, namespace):
    keys = draw(st.lists(st.sampled_from(ORDINARY + BUDGET), min_size=1, max_size=6, unique=True))
    return {"apiVersion": "v1", "kind": "ResourceQuota",
            "metadata": {"name": draw(st.sampled_from(["tenant-quota", "extra"])), "namespace": namespace},
            "spec": {"hard": {key: str(draw(st.integers(0, 9))) for key in keys}}}


@st.composite
def tenant_namespace(draw, name):
    metadata = {"name": name, "labels": {f"tenant.cozystack.io/{name}": ""}}
    if draw(st.booleans()):
        metadata["labels"]["namespace.cozystack.io/vgpu"] = draw(st.sampled_from(["true", "false", "stale"]))
    if draw(st.booleans()):
        metadata["annotations"] = {"render.cozystack.io/vgpu-requested": draw(FLAGS),
                                   "render.cozystack.io/vgpu-parent": draw(FLAGS)}
        if draw(st.booleans()):
            metadata["annotations"]["postrenderer.helm.sh/postrender-filename"] = "tenant/templates/namespace.yaml"
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": metadata}


@st.composite
def values_secret(draw, namespace):
    values = {"_cluster": {"root-host": "example.org"}, "_namespace": {"host": f"{namespace}.example.org"}}
    cluster_flag = draw(st.sampled_from([None, True, False, "true", "false"]))
    if cluster_flag is not None:
        values["_cluster"]["gpu-vgpu"] = cluster_flag
    if draw(st.booleans()):
        values["_namespace"]["vgpu"] = draw(st.sampled_from([True, False, "true"]))
    text = yaml.safe_dump(values, sort_keys=False)
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "cozystack-values", "namespace": namespace},
            "stringData": {"values.yaml": text}}


@st.composite
def stream(draw):
    docs = []
    for name in draw(st.lists(st.sampled_from(NAMESPACES), unique=True, max_size=3)):
        docs.append(draw(tenant_namespace(name)))
    for _ in range(draw(st.integers(0, 3))):
        docs.append(draw(quota(draw(st.sampled_from(NAMESPACES)))))
    for name in draw(st.lists(st.sampled_from(NAMESPACES), unique=True, max_size=2)):
        docs.append({"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "tenant-range-limits", "namespace": name},
                     "spec": {"limits": [{"type": "Container", "default": {"cpu": "250m"}}]}})
    for name in draw(st.lists(st.sampled_from(NAMESPACES), unique=True, max_size=2)):
        docs.append(draw(values_secret(name)))
    docs.append({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "untouched"}, "data": {"k": "v # not a comment"}})
    docs = draw(st.permutations(docs))
    pieces = []
    for index, doc in enumerate(docs):
        style = draw(st.sampled_from(["block", "flow", "json"]))
        if style == "json":
            body = json.dumps(doc) + "\n"
        else:
            body = yaml.safe_dump(doc, default_flow_style=(style == "flow"), sort_keys=False)
        pieces.append(f"---\n# Source: tenant/templates/{index}.yaml\n{body}")
    return docs, "".join(pieces).encode()


def model(docs: list[dict]) -> list[dict]:
    """The rules, written plainly over whole objects."""
    return [doc for _, doc in indexed_model(docs)]


def indexed_model(docs: list[dict]) -> list[tuple[int, dict]]:
    """`model`, each output object with the index of the input it comes from."""
    entitled = {}
    for doc in docs:
        annotations = doc["metadata"].get("annotations", {})
        if doc["kind"] == "Namespace" and "render.cozystack.io/vgpu-requested" in annotations:
            entitled[doc["metadata"]["name"]] = (
                annotations["render.cozystack.io/vgpu-requested"] == annotations["render.cozystack.io/vgpu-parent"] == "true"
            )
    dropped, kept = set(), set()
    out = []
    for position, doc in enumerate(docs):
        doc = json.loads(json.dumps(doc))
        kind, namespace = doc["kind"], doc["metadata"].get("namespace")
        if kind == "ResourceQuota":
            hard = doc["spec"]["hard"]
            ordinary = {k: v for k, v in hard.items() if not in_budget_domain(k)}
            if not ordinary:
                dropped.add(namespace)
                continue
            kept.add(namespace)
            doc["spec"]["hard"] = ordinary
        elif kind == "Namespace" and doc["metadata"]["name"] in entitled:
            annotations = {k: v for k, v in doc["metadata"]["annotations"].items() if not k.startswith("render.")}
            doc["metadata"].pop("annotations")
            if annotations:
                doc["metadata"]["annotations"] = annotations
            doc["metadata"]["labels"]["namespace.cozystack.io/vgpu"] = "true" if entitled[doc["metadata"]["name"]] else "false"
        elif kind == "Secret" and namespace in entitled:
            values = yaml.safe_load(doc["stringData"]["values.yaml"])
            values["_namespace"].pop("vgpu", None)
            if entitled[namespace]:
                values["_namespace"]["vgpu"] = True
            if values["_cluster"].get("gpu-vgpu") not in (True, "true"):
                values["_cluster"].pop("gpu-vgpu", None)
            doc["stringData"]["values.yaml"] = values
        out.append((position, doc))
    out = [(i, doc) for i, doc in out if not (doc["kind"] == "LimitRange" and doc["metadata"]["namespace"] in dropped - kept)]
    for _, doc in out:
        if doc["kind"] == "Secret" and isinstance(doc["stringData"]["values.yaml"], str):
            doc["stringData"]["values.yaml"] = yaml.safe_load(doc["stringData"]["values.yaml"])
    return out


def parsed(output: bytes) -> list[dict]:
    return parsed_docs([doc for doc in yaml.safe_load_all(output) if doc is not None])


def parsed_docs(docs: list[dict]) -> list[dict]:
    docs = json.loads(json.dumps(docs))
    for doc in docs:
        if doc["kind"] == "Secret":
            doc["stringData"]["values.yaml"] = yaml.safe_load(doc["stringData"]["values.yaml"])
    return docs


@settings(max_examples=150, deadline=None)
@given(stream())
def test_post_render_properties(case):
    docs, data = case
    result = post_render(data)
    out = parsed(result.output)

    for doc in out:
        if doc["kind"] == "ResourceQuota":
            assert not any(in_budget_domain(key) for key in doc["spec"]["hard"])
        if doc["kind"] == "Namespace" and doc["metadata"].get("labels", {}).get("namespace.cozystack.io/vgpu") == "true":
            source = next(d for d in docs if d["kind"] == "Namespace" and d["metadata"]["name"] == doc["metadata"]["name"])
            inputs = source["metadata"].get("annotations", {})
            assert inputs.get("render.cozystack.io/vgpu-requested") == inputs.get("render.cozystack.io/vgpu-parent") == "true" or (
                "render.cozystack.io/vgpu-requested" not in inputs and source["metadata"]["labels"]["namespace.cozystack.io/vgpu"] == "true"
            )

    assert out == model(docs)

    # untouched documents: byte for byte, in order
    originals = parsed_docs(docs)
    in_chunks = [data[c.start:c.end] for c in split_chunks(data)]
    untouched = [in_chunks[i] for i, doc in indexed_model(docs) if doc == originals[i]]
    out_chunks = [result.output[c.start:c.end] for c in split_chunks(result.output)]
    assert [chunk for chunk in out_chunks if chunk in untouched] == untouched

    assert post_render(result.output).output == result.output


@settings(max_examples=500)
@given(st.text())
def test_quoted_scalars_read_back_exactly(text):
    from cozyrender.postrender.yamledit import quote

    assert yaml.safe_load(quote(text)) == text
