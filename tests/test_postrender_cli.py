"""`cozyrender post-render` as Helm runs it: a process reading stdin.

Bad input: exit 1, nothing on stdout, one line on stderr naming the document
(and the same line in $COZYRENDER_LOG); never a traceback.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

COMMAND = [sys.executable, "-m", "cozyrender", "post-render"]


def run(data: bytes, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(COMMAND, input=data, capture_output=True, env={**os.environ, **env}, timeout=60)


def test_empty_input_prints_nothing_and_succeeds():
    result = run(b"")
    assert (result.returncode, result.stdout, result.stderr) == (0, b"", b"")


def test_a_good_stream_goes_through():
    stream = b"---\n# Source: c/templates/a.yaml\nkind: ConfigMap\nmetadata: {name: a}\n"
    result = run(stream)
    assert (result.returncode, result.stdout) == (0, stream)


BOMB = b"kind: ConfigMap\n" + b"a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n" + b"".join(
    b"a%d: &a%d [%s]\n" % (i, i, b", ".join([b"*a%d" % (i - 1)] * 10)) for i in range(1, 9)
)

BAD_INPUTS = {
    "invalid yaml": (b"---\n# Source: c/templates/q.yaml\nkind: ResourceQuota\nspec: [\n", "document 1 (c/templates/q.yaml): invalid YAML"),
    "invalid yaml in a document no rule reads": (b"kind: ConfigMap\n---\nkind: ConfigMap\ndata: {a: }}\n", "document 2: invalid YAML"),
    "not a mapping": (b"kind: ConfigMap\n---\n- a\n- b\n", "document 2: the document is a sequence, not a mapping"),
    "a scalar": (b"just words\n", "document 1: the document is a scalar"),
    "duplicate key": (b"kind: ConfigMap\nmetadata: {name: a}\nmetadata: {name: b}\n", "duplicate key 'metadata'"),
    "helm 4 filename": (
        b"kind: Namespace\nmetadata:\n  name: x\n  annotations:\n    postrenderer.helm.sh/postrender-filename: tenant/templates/ns.yaml\n"
        b"    render.cozystack.io/vgpu-parent: 'true'\n",
        "document 1 (tenant/templates/ns.yaml): Namespace x: annotation render.cozystack.io/vgpu-parent is set",
    ),
    "bad values.yaml": (
        b"kind: Namespace\nmetadata:\n  name: t\n  annotations: {render.cozystack.io/vgpu-parent: 'true', render.cozystack.io/vgpu-requested: 'true'}\n"
        b"---\nkind: Secret\nmetadata: {name: cozystack-values, namespace: t}\nstringData:\n  values.yaml: '{a: ['\n",
        "document 2: Secret t/cozystack-values: stringData.values.yaml does not parse",
    ),
    "bad base64": (
        b"kind: Namespace\nmetadata:\n  name: t\n  annotations: {render.cozystack.io/vgpu-parent: 'true', render.cozystack.io/vgpu-requested: 'true'}\n"
        b"---\nkind: Secret\nmetadata: {name: cozystack-values, namespace: t}\ndata:\n  values.yaml: '!!!'\n",
        "is not base64-encoded UTF-8",
    ),
    "not utf-8": (b"kind: ConfigMap\n---\nkind: ConfigMap\ndata: {a: \xff}\n", "document 2: not UTF-8 (byte 0xff"),
    "python tag": (b"kind: Secret\nmetadata: !!python/object:os.system {}\n", "document 1: tag 'tag:yaml.org,2002:python/object:os.system' is not allowed"),
    "python tag in a document no rule reads": (
        b"kind: ConfigMap\ndata: !!python/object/apply:os.system [echo]\n", "document 1: tag 'tag:yaml.org,2002:python/object/apply:os.system'"),
    "local tag": (b"kind: ConfigMap\ndata: !vault secret/x\n", "document 1: tag '!vault' is not allowed"),
    "alias bomb": (BOMB, "document 1: aliases expand to more than"),
}


@pytest.mark.parametrize("case", list(BAD_INPUTS))
def test_bad_input_fails_cleanly(case, tmp_path):
    data, message = BAD_INPUTS[case]
    log = tmp_path / "cozyrender.log"
    result = run(data, COZYRENDER_LOG=str(log))
    stderr = result.stderr.decode()
    assert result.returncode == 1
    assert result.stdout == b""
    assert stderr.count("\n") == 1, stderr
    assert message in stderr
    assert stderr.startswith("cozyrender post-render: error: ")
    assert "Traceback" not in stderr
    assert log.read_text() == stderr


def test_warnings_go_to_stderr_and_output_still_flows():
    stream = b"kind: ResourceQuota\nmetadata: {name: q}\nspec:\n  hard:\n    cpu: 1\n    x.y.gpuclass.cozystack.io/memory: 1\n"
    result = run(stream)
    assert result.returncode == 0
    assert result.stdout == b"kind: ResourceQuota\nmetadata: {name: q}\nspec:\n  hard:\n    cpu: 1\n"
    assert b"warning: document 1: removed malformed GPU budget key 'x.y.gpuclass.cozystack.io/memory'" in result.stderr


def test_help_goes_through_click():
    result = subprocess.run([sys.executable, "-m", "cozyrender", "post-render", "--help"], capture_output=True, text=True)
    assert result.returncode == 0 and "Helm post-renderer" in result.stdout


def test_the_hot_path_imports_only_what_it_needs():
    """Helm starts a post-renderer per release: no CLI framework, no round-trip
    YAML, no schema or Helm libraries on that path."""
    probe = (
        "import sys, io\n"
        "sys.stdin = io.TextIOWrapper(io.BytesIO(sys.argv[1].encode()))\n"
        "sys.stdout = io.TextIOWrapper(io.BytesIO())\n"
        "from cozyrender.cli import main\n"
        "try:\n"
        "    main(['post-render'])\n"
        "except SystemExit as exit:\n"
        "    assert exit.code == 0, exit.code\n"
        "print(' '.join(sorted(sys.modules)), file=sys.__stdout__)\n"
    )
    stream = "kind: Namespace\nmetadata:\n  name: t\n  annotations: {render.cozystack.io/vgpu-requested: 'true', render.cozystack.io/vgpu-parent: 'true'}\n"
    result = subprocess.run([sys.executable, "-c", probe, stream], capture_output=True, text=True, check=True)
    modules = set(result.stdout.split())
    assert "cozyrender.postrender.pipeline" in modules and "yaml" in modules
    for heavy in ("click", "ruamel", "jsonschema", "helm_python", "jinja2", "hypothesis", "json", "dataclasses",
                  "typing", "cozyrender.render", "cozyrender.budgets", "cozyrender.gpuclass", "cozyrender.flux"):
        assert not any(m == heavy or m.startswith(heavy + ".") for m in modules), heavy
