"""cozyrender.render and `cozyrender template`: the SDK render printed byte for
byte as the pinned `helm template` binaries print it."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from cozyrender import render
from cozyrender.render import RenderError, load_values, merge_values, split_manifests, template

ROOT = Path(__file__).resolve().parent.parent
TENANT = ROOT / "charts" / "tenant"

# A chart full of the cases Helm's splitting and sorting treat specially.
TRICKY = {
    "Chart.yaml": "apiVersion: v2\nname: tricky\nversion: 0.1.0\n",
    "values.yaml": "count: 1\n",
    "charts/child/Chart.yaml": "apiVersion: v2\nname: child\nversion: 0.1.0\n",
    "charts/child/templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: from-subchart\n",
    "templates/NOTES.txt": "Thanks for installing {{ .Release.Name }}.\n",
    "templates/_partial.tpl": '{{- define "tricky.x" -}}x{{- end -}}\nkind: ShouldNotAppear\n',
    "templates/empty.yaml": "{{- if false }}\nkind: Nope\n{{- end }}\n   \n",
    "templates/multi.yaml": textwrap.dedent("""\
        # a leading comment before the first separator
        ---
        apiVersion: v1
        kind: Service
        metadata:
          name: svc
        spec:
          ports: [{port: 80}]
        ---   
        ---
        apiVersion: v1
        kind: ServiceAccount
        metadata:
          name: sa
          annotations:
            note: "not a hook"
        --- # trailing text after a separator
        apiVersion: example.com/v1
        kind: Zebra
        metadata:
          name: z
        ---
        apiVersion: example.com/v1
        kind: Aardvark
        metadata:
          name: a
        ---
        data:
          block: |
            line one
            ---
            line three
        apiVersion: v1
        kind: ConfigMap
        metadata:
          name: with-dashes
        ---
        # only a comment
        ---
        apiVersion: v1
        kind: Namespace
        metadata:
          name: ns
        """),
    "templates/hooks.yaml": textwrap.dedent("""\
        apiVersion: batch/v1
        kind: Job
        metadata:
          name: pre
          annotations:
            helm.sh/hook: pre-install, Post-Upgrade
        spec:
          template:
            spec:
              restartPolicy: Never
              containers: [{name: c, image: busybox}]
        ---
        apiVersion: v1
        kind: ServiceAccount
        metadata:
          name: hook-sa
          annotations:
            helm.sh/hook: pre-delete
            helm.sh/hook-weight: "-5"
        ---
        apiVersion: v1
        kind: Pod
        metadata:
          name: test
          annotations:
            helm.sh/hook: test
        spec:
          containers: [{name: c, image: busybox}]
        ---
        apiVersion: v1
        kind: ConfigMap
        metadata:
          name: unknown-hook
          annotations:
            helm.sh/hook: pre-install,never-heard-of
        """),
    "templates/sub/z.yaml": 'apiVersion: v1\nkind: Secret\nmetadata:\n  name: in-subdir\nstringData:\n  count: "{{ .Values.count }}"\n',
    "templates/sub.yaml": '{"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "json-doc"}}\n',
    "templates/kinds.yaml": "".join(
        f"---\napiVersion: v1\nkind: {kind}\nmetadata:\n  name: k-{i}\n"
        for i, kind in enumerate(reversed(render.INSTALL_ORDER + ("", "Widget", "Apple")))),
}


def write_chart(base: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = base / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return base


@pytest.fixture(scope="module")
def tricky(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_chart(tmp_path_factory.mktemp("charts") / "tricky", TRICKY)


def helm_template(helm: Path, chart: Path, release: str, namespace: str, *args: str) -> bytes:
    proc = subprocess.run([str(helm), "template", release, str(chart), "-n", namespace, *args],
                          capture_output=True, check=True)
    return proc.stdout


def run_cli(*args: str, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "cozyrender", *args], input=stdin,
                          capture_output=True, cwd=ROOT)


# ---------------------------------------------------------------- byte equality

@pytest.mark.parametrize("helm_fixture, ordering", [
    ("helm4", render.INSTALL_ORDER), ("helm3", render.INSTALL_ORDER_HELM3)])
def test_tricky_chart_matches_helm_template_bytes(tricky: Path, helm_fixture: str, ordering: tuple,
                                                  request: pytest.FixtureRequest) -> None:
    helm = request.getfixturevalue(helm_fixture)
    expected = helm_template(helm, tricky, "rel", "ns1")
    assert template(tricky, {}, "rel", "ns1", ordering) == expected
    # the fixture really exercises what it claims to
    text = expected.decode()
    assert "NOTES" not in text and "ShouldNotAppear" not in text and "unknown-hook" not in text
    assert text.index("name: svc") < text.index("kind: Job")  # hooks after manifests
    assert "    ---\n    line three" in text  # a `---` inside a block scalar is no separator


def test_tricky_chart_with_values_and_set_matches_helm(tricky: Path, helm4: Path, tmp_path: Path
                                                       ) -> None:
    first = tmp_path / "a.yaml"
    first.write_text("count: 2\nextra: {a: 1, b: [1, 2]}\n")
    second = tmp_path / "b.yaml"
    second.write_text("extra: {b: [3]}\n")
    sets = ["count=7", "extra.c=x"]
    expected = helm_template(helm4, tricky, "rel", "ns1", "-f", str(first), "-f", str(second),
                             *(a for s in sets for a in ("--set", s)))
    values = load_values([first, second], sets)
    assert values == {"count": 7, "extra": {"a": 1, "b": [3], "c": "x"}}
    assert template(tricky, values, "rel", "ns1") == expected


def test_cli_raw_matches_helm4_for_tenant(helm4: Path, tmp_path: Path) -> None:
    values = tmp_path / "v.yaml"
    values.write_text("resourceQuotas:\n  cpu: 2\n  a100.gpuclass.cozystack.io/devices: 1\n")
    args = ["-f", str(values), "--set", "gpu.vgpu=true", "--set", "host=x.example.org"]
    expected = helm_template(helm4, TENANT, "tenant-a", "tenant-root", *args)
    proc = run_cli("template", "tenant-a", str(TENANT), "-n", "tenant-root", "--raw", *args)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == expected


def test_helm3_and_helm4_differ_only_in_webhook_order(tricky: Path) -> None:
    helm4_text = template(tricky, {}, "rel", "ns1")
    helm3_text = template(tricky, {}, "rel", "ns1", render.INSTALL_ORDER_HELM3)
    assert helm4_text != helm3_text and sorted(helm4_text.split(b"---")) == sorted(
        helm3_text.split(b"---"))


def test_kind_order_is_helms(tricky: Path) -> None:
    kinds = [m.kind for m in render.render(tricky, {}, "rel", "ns1").manifests]
    known = [k for k in kinds if k in render.INSTALL_ORDER]
    assert known == sorted(known, key=render.INSTALL_ORDER.index)
    unknown = kinds[len(known):]
    assert unknown == sorted(unknown) and "Aardvark" in unknown and "Zebra" in unknown


# ---------------------------------------------------------------- pieces

@pytest.mark.parametrize("text, docs", [
    ("", []),
    ("a: 1", ["a: 1"]),
    ("---\na: 1\n---\nb: 2\n", ["a: 1", "b: 2"]),
    ("a: 1\n---   \n---\nb: 2", ["a: 1", "---\nb: 2"]),
    ("a: |\n  x\n  ---\n  y\n", ["a: |\n  x\n  ---\n  y"]),
    ("a: 1\n--- # c\nb: 2", ["a: 1", "# c\nb: 2"]),
    ("\n\n  a: 1\n\n", ["a: 1"]),
])
def test_split_manifests(text: str, docs: list[str]) -> None:
    assert split_manifests(text) == docs


def test_merge_values_merges_maps_and_replaces_the_rest() -> None:
    base = {"a": {"b": 1, "c": [1]}, "d": 1}
    assert merge_values(base, {"a": {"c": [2], "e": None}, "d": {"x": 1}}) == {
        "a": {"b": 1, "c": [2], "e": None}, "d": {"x": 1}}
    assert base == {"a": {"b": 1, "c": [1]}, "d": 1}  # inputs are not modified


def test_render_errors_are_one_line_helm_messages() -> None:
    with pytest.raises(RenderError) as err:
        template(TENANT, {"etcd": "yes"}, "tenant-a", "tenant-root")
    assert "\n" not in str(err.value)
    assert "at '/etcd': got string, want boolean" in str(err.value)
    with pytest.raises(RenderError, match='release name must be "tenant-<name>"'):
        template(TENANT, {}, "tenant-a-b", "tenant-root")
    with pytest.raises(RenderError, match="key \"a\" has no value"):
        load_values([], ["a"])


def test_yaml_parse_error_names_the_template(tmp_path: Path) -> None:
    chart = write_chart(tmp_path / "bad", {
        "Chart.yaml": "apiVersion: v2\nname: bad\nversion: 0.1.0\n",
        "templates/x.yaml": "kind: [unclosed\n",
    })
    with pytest.raises(RenderError, match="YAML parse error on bad/templates/x.yaml"):
        template(chart, {}, "r", "n")


# ---------------------------------------------------------------- the command

@pytest.mark.parametrize("args, message", [
    (["--set", "etcd=yes"], "at '/etcd': got string, want boolean"),
    (["--set", "resourceQuotas.cpu=lots"], "resourceQuotas/cpu"),
    (["--set", "a"], 'key "a" has no value'),
    (["-f", "/nonexistent/values.yaml"], "values.yaml"),
])
def test_cli_errors_exit_2_with_one_line(args: list[str], message: str) -> None:
    proc = run_cli("template", "tenant-a", str(TENANT), "-n", "tenant-root", *args)
    assert proc.returncode == 2
    assert proc.stdout == b""
    err = proc.stderr.decode()
    assert message in err and "Traceback" not in err
    assert err.count("\n") == 1


def test_cli_fail_message_surfaces() -> None:
    proc = run_cli("template", "tenant-a", str(TENANT), "-n", "default")
    assert proc.returncode == 2 and proc.stderr.decode().startswith("cozyrender template: error: ")
    assert 'the release namespace must start with "tenant-", got "default"' in proc.stderr.decode()


def test_cli_post_renders_by_default() -> None:
    args = ["template", "tenant-a", str(TENANT), "-n", "tenant-root",
            "--set", "resourceQuotas.a100\\.gpuclass\\.cozystack\\.io/devices=2"]
    raw = run_cli(*args, "--raw")
    rendered = run_cli(*args)
    assert raw.returncode == 0 and rendered.returncode == 0, rendered.stderr
    raw_kinds = [d["kind"] for d in yaml.safe_load_all(raw.stdout) if d]
    kinds = [d["kind"] for d in yaml.safe_load_all(rendered.stdout) if d]
    assert "ResourceQuota" in raw_kinds and "LimitRange" in raw_kinds
    assert "ResourceQuota" not in kinds and "LimitRange" not in kinds  # GPU-only tenant
    namespace = next(d for d in yaml.safe_load_all(rendered.stdout) if d and d["kind"] == "Namespace")
    assert namespace["metadata"]["labels"]["namespace.cozystack.io/vgpu"] == "false"
    assert "annotations" not in namespace["metadata"]


def test_cli_post_render_error_exits_2(tmp_path: Path) -> None:
    chart = write_chart(tmp_path / "half", {
        "Chart.yaml": "apiVersion: v2\nname: half\nversion: 0.1.0\n",
        "templates/ns.yaml": "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: x\n"
                             "  annotations:\n    render.cozystack.io/vgpu-requested: \"true\"\n",
    })
    assert run_cli("template", "r", str(chart), "-n", "x", "--raw").returncode == 0
    proc = run_cli("template", "r", str(chart), "-n", "x")
    assert proc.returncode == 2 and proc.stdout == b""
    err = proc.stderr.decode()
    assert "post-render" in err and "Traceback" not in err and err.count("\n") == 1


# ---------------------------------------------------------------- the --set family

VALUES_CHART = {
    "Chart.yaml": "apiVersion: v2\nname: dump\nversion: 0.1.0\n",
    "values.yaml": "fromChart: 1\n",
    "templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: values\n"
                         "data:\n  values: {{ toJson .Values | quote }}\n",
}


@pytest.fixture(scope="module")
def dump_chart(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_chart(tmp_path_factory.mktemp("charts") / "dump", VALUES_CHART)


def _set_args(**flags: list[str]) -> list[str]:
    return [a for flag, exprs in flags.items() for e in exprs
            for a in (f"--{flag.replace('_', '-')}", e)]


def test_set_family_order_and_list_index_match_helm4(dump_chart: Path, helm4: Path, tmp_path: Path
                                                     ) -> None:
    base = tmp_path / "base.yaml"
    base.write_text("a: 0\nl: [p, {m: 1}, [x], {}, null]\ne: []\nkeep: {k: v}\n")
    content = tmp_path / "content.txt"
    content.write_text("from a file\n")
    flags = {
        # one key set by every flavour: Helm applies json, set, string, file in that order
        "set_file": [f"a={content}", f"l[1].f={content}"],
        "set_string": ["a=string,s=1", "l[0]=2"],
        "set": ["a=1", "l[1].n=2", "l[2][1]=y", "l[6]=z", "e[1]=x", "b=true"],
        "set_json": ['a="json"', '{"j": {"o": [1, 2]}, "keep": {"x": null}}', 'j.o[2]={"p": 3}'],
    }
    args = ["-f", str(base), *_set_args(**flags)]
    expected = helm_template(helm4, dump_chart, "rel", "ns1", *args)
    values = load_values([base], flags["set"], set_json=flags["set_json"],
                         set_string=flags["set_string"], set_file=flags["set_file"])
    assert values["a"] == "from a file\n" and values["s"] == "1" and values["b"] is True
    assert values["l"] == ["2", {"m": 1, "n": 2, "f": "from a file\n"}, ["x", "y"], {}, None,
                           None, "z"]
    assert values["e"] == [None, "x"] and values["j"] == {"o": [1, 2, {"p": 3}]}
    assert template(dump_chart, values, "rel", "ns1") == expected
    proc = run_cli("template", "rel", str(dump_chart), "-n", "ns1", "--raw", *args)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == expected


@pytest.mark.parametrize("flags", [
    {"set": ["l={a,b}"]},            # a whole list replaces the list
    {"set": ["l[0].k=1"]},           # a scalar item becomes a map
    {"set_string": ["l[3]=null"]},   # a string, not null
    {"set_json": ["l[1]=null", "m.n=[1,{\"x\":2}]"]},
    {"set": ["m.n[0]=q"], "set_json": ["m.n[1]={}"]},
])
def test_set_variants_match_helm4(dump_chart: Path, helm4: Path, tmp_path: Path,
                                  flags: dict[str, list[str]]) -> None:
    base = tmp_path / "base.yaml"
    base.write_text("l: [p, q, r, s]\nm: {n: [1, 2]}\n")
    expected = helm_template(helm4, dump_chart, "rel", "ns1", "-f", str(base), *_set_args(**flags))
    values = load_values([base], flags.get("set", ()), set_json=flags.get("set_json", ()),
                         set_string=flags.get("set_string", ()))
    assert template(dump_chart, values, "rel", "ns1") == expected


@pytest.mark.parametrize("base_text, kwargs, message", [
    ("a: s\n", {"sets": ["a.b=1"]}, "failed parsing --set data: unable to parse key"),
    ("", {"set_json": ["a=[bad"]}, "failed parsing --set-json data"),
    ("", {"set_json": ["{bad"]}, "failed parsing --set-json data JSON: {bad"),
    ("", {"set_string": ["a"]}, 'failed parsing --set-string data: key "a" has no value'),
    ("l: [1]\n", {"set_file": ["l[0]=/nonexistent/x"]}, "failed parsing --set-file data: open"),
])
def test_set_family_errors_like_helm4(dump_chart: Path, helm4: Path, tmp_path: Path,
                                      base_text: str, kwargs: dict, message: str) -> None:
    base = tmp_path / "base.yaml"
    base.write_text(base_text)
    sets = kwargs.pop("sets", ())
    with pytest.raises(RenderError, match=re.escape(message)):
        load_values([base], sets, **kwargs)
    flags = {"set": list(sets), **kwargs}
    proc = subprocess.run([str(helm4), "template", "rel", str(dump_chart), "-f", str(base),
                           *_set_args(**flags)], capture_output=True)
    assert proc.returncode != 0 and message in proc.stderr.decode()


def test_cli_set_family_error_exits_2() -> None:
    proc = run_cli("template", "tenant-a", str(TENANT), "-n", "tenant-root",
                   "--set-file", "host=/nonexistent/file")
    err = proc.stderr.decode()
    assert proc.returncode == 2 and proc.stdout == b""
    assert "failed parsing --set-file data" in err and "Traceback" not in err
    assert err.count("\n") == 1


def test_cli_capabilities_match_helm4(helm4: Path, tmp_path: Path) -> None:
    chart = write_chart(tmp_path / "cap", {
        "Chart.yaml": "apiVersion: v2\nname: cap\nversion: 0.1.0\n",
        "templates/cm.yaml": (
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cap}\ndata:\n"
            "  kube: {{ .Capabilities.KubeVersion.Version | quote }}\n"
            "  minor: {{ .Capabilities.KubeVersion.Minor | quote }}\n"
            "{{- range $v := list \"cozystack.io/v1alpha1\" \"cozystack.io/v1alpha1/GPUClass\" \"x.io/v1\" }}\n"
            "  {{ $v | replace \"/\" \"_\" | replace \".\" \"_\" }}: {{ $.Capabilities.APIVersions.Has $v | quote }}\n"
            "{{- end }}\n"),
    })
    args = ["-a", "cozystack.io/v1alpha1/GPUClass", "--api-versions", "x.io/v1", "--kube-version", "1.33.4"]
    expected = helm_template(helm4, chart, "rel", "ns1", *args)
    proc = run_cli("template", "rel", str(chart), "-n", "ns1", "--raw", *args)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == expected
    data = yaml.safe_load(expected.split(b"\n", 2)[2])["data"]
    assert data["kube"] == "v1.33.4" and data["cozystack_io_v1alpha1_GPUClass"] == "true"
