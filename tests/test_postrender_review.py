"""Adversarial review of the post-renderer (issue 13): inputs that libyaml
(the rules' reader) and Helm read differently. Each exited 0 with output Helm
then applied otherwise than the rules decided: a budget key left in a
quota, `_namespace.vgpu` in a tenant that is not entitled. Each is now
refused in one line, or post-rendered as Helm will read it.

Helm's readers, from their sources: Helm 3 builds objects with Kubernetes'
YAML reader (k8s.io/apimachinery pkg/util/yaml `YAMLReader.Read`: a line
starting with `---` and then only blanks or a comment ends a document) and
sigs.k8s.io/yaml (go-yaml v2: `decoder.mapping` merges `<<` in place;
`!!binary` decoded to text); Helm 4 first rewrites the post-rendered stream
with kyaml (`kio.ParseAll`: CRLF replaced by LF, split at `\\n---.*\\n`);
both flatten Lists with cli-runtime's `FlattenListVisitor` after
apimachinery's `unstructuredJSONScheme.decode` (any object with an `items`
field, matched as Go's JSON decoder matches field names, is a List; items
with neither kind nor apiVersion take the List's kind less `List`; nested
Lists are flattened too). The `---#`, CR-CRLF, merge and `!!binary` cases
were also run through the pinned helm3/helm4 binaries (`helm template`
orders documents by the kind Helm reads; Helm 4 prints the post-rendered
stream as kyaml read it); the tests below run the real helm4 for two of them.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import yaml

from cozyrender.postrender import PostRenderError, post_render

QUOTA = ("{apiVersion: v1, kind: ResourceQuota, metadata: {name: q, namespace: t}, "
         "spec: {hard: {cpu: '1', gpuclass.cozystack.io/devices: '2'}}}")
QUOTA_KEPT = ("{apiVersion: v1, kind: ResourceQuota, metadata: {name: q, namespace: t}, "
              "spec: {hard: {cpu: '1'}}}")
NAMESPACE = """apiVersion: v1
kind: Namespace
metadata:
  name: tenant-a
  annotations:
    render.cozystack.io/vgpu-requested: "false"
    render.cozystack.io/vgpu-parent: "true"
"""
HELM4 = Path(__file__).resolve().parents[1] / ".cache" / "bin" / "helm4"


def refused(data: bytes | str) -> str:
    with pytest.raises(PostRenderError) as err:
        post_render(data.encode() if isinstance(data, str) else data)
    assert "\n" not in err.value.message
    return err.value.message


# -- 1. a merge key after other keys: Helm lets it override them -------------


@pytest.mark.parametrize("document", [
    # PyYAML: a ConfigMap; Helm: a ResourceQuota with a budget key
    "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: q, namespace: t}\n"
    "spec: {hard: {gpuclass.cozystack.io/devices: '2'}}\n<<: {kind: ResourceQuota}\n",
    # PyYAML: a quota without budget keys; Helm: spec from the merge
    "apiVersion: v1\nkind: ResourceQuota\nmetadata: {name: q, namespace: t}\nspec: {hard: {cpu: '1'}}\n"
    "<<: {spec: {hard: {gpuclass.cozystack.io/devices: '2'}}}\n",
    # an alias key counts as a key before the merge
    "a: &k kind\nkind: ConfigMap\nb: {*k : x, <<: {kind: y}}\n",
])
def test_a_merge_key_after_other_keys_is_refused(document):
    assert "a merge key '<<' after other keys of its mapping" in refused(document)


def test_a_merge_key_in_values_yaml_after_other_keys_is_refused():
    """`_namespace: {}` then `<<: {_namespace: {vgpu: true}}`: PyYAML reads no
    `_namespace.vgpu`, Helm (and Flux's valuesFrom) `_namespace.vgpu: true`,
    in a tenant that is not entitled."""
    secret = ("---\napiVersion: v1\nkind: Secret\nmetadata: {name: cozystack-values, namespace: tenant-a}\n"
              "stringData:\n  values.yaml: |\n    _namespace: {}\n    <<: {_namespace: {vgpu: true}}\n")
    message = refused(NAMESPACE + secret)
    assert message.startswith("document 2: Secret tenant-a/cozystack-values: stringData.values.yaml")
    assert "a merge key '<<' after other keys" in message


def test_a_merge_key_first_in_its_mapping_still_passes():
    """Placed first, both readers let the written keys win."""
    stream = b"kind: ConfigMap\nmetadata: {name: a}\ndata: &d {a: '1'}\nextra: {<<: *d, b: '2'}\n"
    assert post_render(stream).output == stream


def test_an_anchored_merge_key_is_refused():
    assert "an anchor on a merge key" in refused("kind: ConfigMap\nm: {&m <<: {a: 1}}\n")


# -- 2. Lists as Helm's client reads them --------------------------------------


@pytest.mark.parametrize("document", [
    f"apiVersion: v1\nkind: ResourceQuotaList\nitems:\n- {QUOTA}\n",
    f"apiVersion: v1\nkind: ConfigMap\nitems:\n- {QUOTA}\n",
    f"apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: List\n  items:\n  - {QUOTA}\n",
])
def test_every_document_with_items_is_a_list(document):
    """Any kind with an `items` field, and Lists inside Lists: the quota in it
    loses its budget keys."""
    output = post_render(document.encode()).output.decode()
    assert output == document.replace(QUOTA, QUOTA_KEPT)


def test_an_item_without_kind_takes_the_lists_kind():
    document = ("apiVersion: v1\nkind: ResourceQuotaList\nitems:\n"
                "- {metadata: {name: q, namespace: t}, spec: {hard: {cpu: '1', gpuclass.cozystack.io/devices: '2'}}}\n")
    output = post_render(document.encode()).output.decode()
    assert yaml.safe_load(output)["items"] == [{"metadata": {"name": "q", "namespace": "t"}, "spec": {"hard": {"cpu": "1"}}}]


def test_a_gpu_only_quota_in_a_nested_list_is_dropped_with_its_limit_range():
    document = ("kind: List\nitems:\n- kind: List\n  items:\n"
                "  - {kind: ResourceQuota, metadata: {name: q, namespace: t}, spec: {hard: {gpuclass.cozystack.io/devices: '2'}}}\n"
                "  - {kind: ConfigMap, metadata: {name: c, namespace: t}}\n"
                "- {kind: LimitRange, metadata: {name: l, namespace: t}}\n")
    output = post_render(document.encode()).output.decode()
    assert yaml.safe_load(output) == {"kind": "List", "items": [
        {"kind": "List", "items": [{"kind": "ConfigMap", "metadata": {"name": "c", "namespace": "t"}}]}]}


def test_a_values_secret_in_a_secret_list_is_edited():
    """A SecretList item without kind is a Secret to Helm: a tenant that is not
    entitled loses `_namespace.vgpu` there too."""
    stream = NAMESPACE + ("---\napiVersion: v1\nkind: SecretList\nitems:\n"
                          "- metadata: {name: cozystack-values, namespace: tenant-a}\n  stringData:\n"
                          "    values.yaml: |\n      _namespace:\n        vgpu: true\n        host: a\n")
    output = post_render(stream.encode()).output
    documents = list(yaml.safe_load_all(output))
    assert yaml.safe_load(documents[1]["items"][0]["stringData"]["values.yaml"]) == {"_namespace": {"host": "a"}}
    assert post_render(output).output == output


@pytest.mark.parametrize("key", ["Items", "ITEMS", "\u0131tems", "item\u017f"])
def test_a_key_kubernetes_reads_as_items_is_refused(key):
    """Go's JSON decoder matches `items` without regard to case (and folds ı, ſ)."""
    assert "is read as 'items' by Kubernetes" in refused(f"apiVersion: v1\nkind: List\n{key}:\n- {QUOTA}\n")


@pytest.mark.parametrize("kind", ["Namespace", "ResourceQuota", "LimitRange", "Secret"])
def test_an_object_a_rule_reads_with_an_items_field_is_refused(kind):
    """Helm would create only its items, not the object the rules read it as
    (a tenant Namespace that never reaches the facts, say)."""
    assert "has an 'items' field" in refused(f"apiVersion: v1\nkind: {kind}\nmetadata: {{name: x}}\nitems: []\n")


# -- 3. a `---` line that is no document marker --------------------------------


@pytest.mark.parametrize("line", ["---#: |", "---\u00a0: |", "---x: |"])
def test_a_line_starting_with_dashes_that_is_no_marker_is_refused(line):
    """libyaml: one ConfigMap (the rest a block scalar); Kubernetes' reader
    and kyaml: a second document, an indented ResourceQuota."""
    stream = ("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x, namespace: t}\n" + line + "\n"
              "  apiVersion: v1\n  kind: ResourceQuota\n  metadata: {name: q, namespace: t}\n"
              "  spec: {hard: {gpuclass.cozystack.io/devices: '2'}}\n")
    assert "a line starts with '---' but is no document marker" in refused(stream)


def test_markers_with_comments_and_blanks_still_pass():
    stream = b"--- # first\nkind: ConfigMap\n---\t\nkind: ConfigMap\n---\r\nkind: ConfigMap\n---"
    assert post_render(stream).output == stream


# -- 4. a CR right before a CRLF -----------------------------------------------


def test_a_cr_before_a_crlf_is_refused():
    """libyaml: `Resource\\nQuota` (two breaks); Helm: `ResourceQuota` (Helm 3's
    Kubernetes line reader ends the line `...\\<CR>` with LF, Helm 4's kyaml
    rewrites CRLF to LF)."""
    stream = (b'apiVersion: v1\nkind: "Resource\\\r\r\nQuota"\nmetadata: {name: q, namespace: t}\n'
              b"spec: {hard: {gpuclass.cozystack.io/devices: '2'}}\n")
    assert "a CR right before a CRLF line break" in refused(stream)


# -- 5. !!binary ----------------------------------------------------------------


@pytest.mark.parametrize("document", [
    "apiVersion: v1\nkind: !!binary UmVzb3VyY2VRdW90YQ==\nmetadata: {name: q, namespace: t}\n"
    "spec: {hard: {gpuclass.cozystack.io/devices: '2'}}\n",
    "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: q, namespace: t}\n"
    "spec: {hard: {gpuclass.cozystack.io/devices: '2'}}\n? !!binary a2luZA==\n: ResourceQuota\n",
    "kind: ConfigMap\nbinaryData: {b: !!binary aGk=}\n",
])
def test_binary_nodes_are_refused(document):
    assert "a !!binary node" in refused(document)


# -- 6. !!set, !!omap, !!pairs ----------------------------------------------------


def test_a_set_tag_on_a_values_secrets_metadata_is_refused():
    """PyYAML: metadata is a set (no name, so no values Secret: passed
    unchanged); Helm: a mapping naming tenant-a's cozystack-values, applied
    with `_namespace.vgpu: true` in a tenant that is not entitled."""
    secret = ("---\napiVersion: v1\nkind: Secret\nmetadata: !!set {name: cozystack-values, namespace: tenant-a}\n"
              "stringData: {values.yaml: '_namespace: {vgpu: true}'}\n")
    assert "tag 'tag:yaml.org,2002:set' (line 4) is not supported: Helm reads it as a plain mapping" \
        in refused(NAMESPACE + secret)


@pytest.mark.parametrize("value", ["!!set {hard: {gpuclass.cozystack.io/devices: '2'}}", "!!omap [{a: 1}]", "!!pairs [{a: 1}]"])
def test_set_omap_and_pairs_are_refused(value):
    document = f"apiVersion: v1\nkind: ResourceQuota\nmetadata: {{name: q, namespace: t}}\nspec: {value}\n"
    assert "is not supported: Helm reads it as a plain" in refused(document)


# -- 7. a tenant Namespace without a name ----------------------------------------


def test_a_tenant_namespace_without_a_name_is_refused():
    """Its entitlement was recorded under None, and a values Secret without a
    namespace (which Helm puts in the release namespace, the parent's) took it:
    `_namespace.vgpu: true` written into it."""
    stream = NAMESPACE.replace("  name: tenant-a\n", "  generateName: tenant-\n").replace('"false"', '"true"') + (
        "---\napiVersion: v1\nkind: Secret\nmetadata: {name: cozystack-values}\nstringData: {values.yaml: 'foo: 1'}\n")
    assert "a tenant Namespace without a metadata.name" in refused(stream)


# -- the real Helm 4 reads the refused shapes as said ---------------------------


@pytest.fixture(scope="module")
def helm4_cat(tmp_path_factory):
    """`helm4 template` of a one-template chart with a post-renderer plugin that
    prints a given file: Helm 4's reading of a post-rendered stream."""
    root = tmp_path_factory.mktemp("helm4")
    plugin = root / "src" / "catfile"
    plugin.mkdir(parents=True)
    (plugin / "plugin.yaml").write_text(
        "apiVersion: v1\ntype: postrenderer/v1\nname: catfile\nversion: 0.1.0\nruntime: subprocess\n"
        "runtimeConfig:\n  platformCommand:\n    - command: sh\n      args: ['-c', 'cat > /dev/null; cat \"$CATFILE\"']\n")
    chart = root / "chart"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: c\nversion: 0.1.0\n")
    (chart / "templates" / "a.yaml").write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n")
    env = {**os.environ, **{name: str(root / name) for name in ("HELM_DATA_HOME", "HELM_CONFIG_HOME", "HELM_CACHE_HOME")}}
    subprocess.run([str(HELM4), "plugin", "install", str(plugin)], env=env, check=True, capture_output=True)

    def read(stream: bytes) -> list:
        path = root / "stream.yaml"
        path.write_bytes(stream)
        done = subprocess.run([str(HELM4), "template", "x", str(chart), "--post-renderer", "catfile"],
                              env={**env, "CATFILE": str(path)}, check=True, capture_output=True)
        return [doc for doc in yaml.safe_load_all(done.stdout) if doc]

    return read


def test_helm4_reads_a_dashes_line_as_a_document_marker(helm4_cat):
    stream = ("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x, namespace: t}\n---#: |\n"
              "  apiVersion: v1\n  kind: ResourceQuota\n  metadata: {name: q, namespace: t}\n"
              "  spec: {hard: {gpuclass.cozystack.io/devices: '2'}}\n").encode()
    assert [doc["kind"] for doc in yaml.safe_load_all(stream)] == ["ConfigMap"]
    assert sorted(doc["kind"] for doc in helm4_cat(stream)) == ["ConfigMap", "ResourceQuota"]


def test_helm4_reads_a_cr_before_a_crlf_as_one_break(helm4_cat):
    stream = b'apiVersion: v1\nkind: "Resource\\\r\r\nQuota"\nmetadata: {name: q, namespace: t}\n'
    assert yaml.safe_load(stream)["kind"] == "Resource\nQuota"
    assert [doc["kind"] for doc in helm4_cat(stream)] == ["ResourceQuota"]
