"""Properties of the post-renderer over generated streams (hypothesis).

- no ResourceQuota in the output holds a key in the budget domain;
- no namespace is labelled "true" unless both render inputs are "true";
- documents the rules do not change come out byte for byte;
- post-rendering the output again changes nothing;
- the output objects are what a plain model of the rules says.

The streams are written in many YAML spellings (`spelled`): block, flow and
JSON documents; explicit `? key` entries; tags and anchors on the mappings the
rules edit; comment and blank lines between a List item's dash and its
content; literal blocks with trailing blank lines; a byte order mark at the
stream start and before comment lines; lone CRs before a `---`; `--- #`
comments, `...` markers (repeated, with comments between) and `%YAML`
directives (with blank or comment lines before their `---`). Kinds named
in comments of other documents make the splitter parse them too.
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
    if draw(st.booleans()):  # as Cozystack's charts label a tenant: a stock tenant when it has no inputs
        metadata["labels"]["tenant.cozystack.io/tenant-root"] = ""
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
    # values.yaml in a drawn spelling too: explicit keys, tags and anchors on _namespace and _cluster
    text = draw(spelled(values)) if draw(st.booleans()) else yaml.safe_dump(values, sort_keys=False)
    if draw(st.booleans()):  # a block scalar with trailing blank lines, one of them holding content
        text += "note: |\n  x\n   \n" + "  \n" * draw(st.integers(0, 2))
    if draw(st.booleans()):
        text = "\ufeff" + text
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
    if draw(st.booleans()):  # some quotas and LimitRanges as the items of one `kind: List`
        grouped = [i for i, doc in enumerate(docs) if doc["kind"] in ("ResourceQuota", "LimitRange") and draw(st.booleans())]
        if grouped:
            items = [docs[i] for i in grouped]
            docs = [doc for i, doc in enumerate(docs) if i not in grouped[1:]]
            docs[grouped[0]] = {"apiVersion": "v1", "kind": "List", "items": items}
    pieces = []
    for index, doc in enumerate(docs):
        style = draw(st.sampled_from(["block", "flow", "json", "spelled"]))
        if style == "json":
            body = json.dumps(doc) + "\n"
        elif style == "spelled":
            body = draw(spelled(doc))
        else:
            body = yaml.safe_dump(doc, default_flow_style=(style == "flow"), sort_keys=False)
        untouched = doc["kind"] == "ConfigMap"
        if untouched and draw(st.booleans()):
            body = body[:-1] + "\r"  # a lone CR ends the line before the next `---`
        separator = draw(st.sampled_from(["---\n", "--- # separator\n", "...\n---\n", "...\n%YAML 1.1\n---\n",
                                          "...\n%YAML 1.1\n\n# directive above\n---\n", "...\n# c\n...\n---\n"]))
        if index == 0 and separator.startswith("..."):
            separator = separator.split("...\n")[-1]  # a stream cannot open with `...`
        if index and pieces[-1].endswith("\r") and separator.startswith("..."):
            separator = "---\n"  # `...` after a lone CR: still a marker, kept simple
        comment = draw(st.sampled_from(["", "# mentions Namespace and ResourceQuota\n", "\ufeff# a BOM before a comment\n"]))
        pieces.append(f"{separator}# Source: tenant/templates/{index}.yaml\n{comment}{body}")
    data = "".join(pieces).encode()
    if draw(st.booleans()):
        data = b"\xef\xbb\xbf" + data
    return docs, data


@st.composite
def spelled(draw, doc: dict) -> str:
    """`doc` as block YAML in a drawn spelling: explicit keys, tags and anchors
    on mappings, comments and blank lines after a List item's dash, literal
    blocks with trailing blank lines for multi-line strings."""
    anchors = iter(range(1, 1000))

    def properties() -> str:
        chosen = draw(st.sampled_from(["", "!!map ", "&a{} ", "&a{} !!map "]))
        return chosen.format(next(anchors)) if "{}" in chosen else chosen

    def scalar(value) -> str:
        return json.dumps(value)

    def mapping(value: dict, pad: str) -> str:
        lines = []
        for key, item in value.items():
            explicit = draw(st.integers(0, 4)) == 0
            head = f"{pad}? {scalar(key)}\n{pad}:" if explicit else f"{pad}{scalar(key)}:"
            lines.append(head + node(item, pad + "  "))
        return "".join(lines)

    def node(value, pad: str) -> str:
        """A value after `key:` (or a dash), from its first line on."""
        if isinstance(value, dict):
            prefix = properties()
            if not value:
                return f" {prefix}{{}}\n"
            return f" {prefix}".rstrip(" ") + "\n" + mapping(value, pad)
        if isinstance(value, list):
            if not value:
                return " []\n"
            out = "\n"
            for item in value:
                between = draw(st.sampled_from(["", "  # an item\n", "  # ---\n", "\n", "  # a-b\n\n"]))
                if isinstance(item, dict) and item and between:
                    out += f"{pad}-\n" + "".join(f"{pad}{line}\n" if line else "\n" for line in between.split("\n")[:-1])
                    out += mapping(item, pad + "  ")
                else:
                    out += f"{pad}-" + node(item, pad + "  ")
            return out
        if isinstance(value, str) and "\n" in value and value.endswith("\n") and not value.startswith((" ", "\n")) \
                and all(line.strip() or not line for line in value.split("\n")[:-1]):
            body = "".join(f"{pad}{line}\n" if line else "\n" for line in value[:-1].split("\n"))
            return " |\n" + body + f"{pad}\n" * draw(st.integers(0, 2))  # trailing blank lines: not content
        return f" {scalar(value)}\n"

    return mapping(doc, "")


def model(docs: list[dict]) -> list[dict]:
    """The rules, written plainly over whole objects."""
    return [doc for _, doc in indexed_model(docs)]


def indexed_model(docs: list[dict]) -> list[tuple[int, dict]]:
    """`model`, each output document with the index of the input it comes
    from; the items of a List follow the rules as objects of their own."""
    flat = []  # (input index, object, whether a List item)
    for position, doc in enumerate(docs):
        flat.extend((position, item, True) for item in doc["items"]) if doc["kind"] == "List" else flat.append((position, doc, False))
    objects = _object_model([obj for _, obj, _ in flat])
    out: list[tuple[int, dict]] = []
    lists: dict[int, dict] = {}
    for (position, _, in_list), obj in zip(flat, objects):
        if in_list and position not in lists:
            lists[position] = {"apiVersion": "v1", "kind": "List", "items": []}
            out.append((position, lists[position]))
        if obj is not None:
            (lists[position]["items"].append(obj) if in_list else out.append((position, obj)))
    return out


def _object_model(docs: list[dict]) -> list[dict | None]:
    """The rules over objects: each one as it comes out, None when dropped."""
    entitled = {}
    for doc in docs:
        annotations = doc["metadata"].get("annotations", {})
        if doc["kind"] == "Namespace" and "render.cozystack.io/vgpu-requested" in annotations:
            entitled[doc["metadata"]["name"]] = (
                annotations["render.cozystack.io/vgpu-requested"] == annotations["render.cozystack.io/vgpu-parent"] == "true"
            )
        elif doc["kind"] == "Namespace" and "tenant.cozystack.io/tenant-root" in doc["metadata"]["labels"] \
                and "namespace.cozystack.io/vgpu" not in doc["metadata"]["labels"]:
            entitled[doc["metadata"]["name"]] = False  # a stock Cozystack tenant: not entitled
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
            annotations = {k: v for k, v in doc["metadata"].get("annotations", {}).items() if not k.startswith("render.")}
            doc["metadata"].pop("annotations", None)
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
    result: list[dict | None] = [None] * len(docs)
    for i, doc in out:
        if doc["kind"] == "LimitRange" and doc["metadata"]["namespace"] in dropped - kept:
            continue
        if doc["kind"] == "Secret" and isinstance(doc["stringData"]["values.yaml"], str):
            doc["stringData"]["values.yaml"] = yaml.safe_load(doc["stringData"]["values.yaml"])
        result[i] = doc
    return result


def parsed(output: bytes) -> list[dict]:
    """The output as libyaml reads it (the reader the contract follows; PyYAML's
    pure-Python one does not skip a BOM before a comment mid-stream)."""
    return parsed_docs([doc for doc in yaml.load_all(output, Loader=yaml.CSafeLoader) if doc is not None])


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
