"""The post-renderer under the real Helm binaries (helm v3.17.3 and v4.1.4).

Helm 3 runs `cozyrender` as an executable post-renderer; Helm 4 runs the
`postrenderer/v1` plugin shipped in plugins/cozyrender. A post-renderer
failure fails the Helm command with cozyrender's message visible: on stderr
for Helm 3, on the terminal for Helm 4 (which discards a plugin's stderr).
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from cozyrender.postrender import post_render
from tests.conftest import CHARTS, ROOT

DATA = Path(__file__).parent / "data" / "helm"
GPU_VALUES = [
    "--set", "resourceQuotas.cpu=2",
    "--set", "resourceQuotas.a100\\.gpuclass\\.cozystack\\.io/devices=2",
    "--set", "gpu.vgpu=true",
    "--set", "_namespace.vgpu=true",
    "--set", "_namespace.host=example.org",
    "--set", "_cluster.gpu-vgpu=true",
]
GPU_ONLY_VALUES = ["--set", "resourceQuotas.gpuclass\\.cozystack\\.io/devices=1"]


@pytest.fixture
def helm_env(tmp_path) -> dict[str, str]:
    """An isolated Helm home, with the venv's `cozyrender` first on PATH."""
    env = dict(os.environ)
    for name in ("CONFIG", "DATA", "CACHE"):
        env[f"HELM_{name}_HOME"] = str(tmp_path / "helm" / name.lower())
    env.pop("HELM_PLUGINS", None)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return env


@pytest.fixture
def helm4_with_plugins(helm4, helm_env) -> tuple[Path, dict[str, str]]:
    for plugin in (ROOT / "plugins" / "cozyrender", DATA / "capture"):
        result = subprocess.run([helm4, "plugin", "install", plugin], env=helm_env, capture_output=True, text=True)
        assert result.returncode == 0, result.stderr
    listing = subprocess.run([helm4, "plugin", "list"], env=helm_env, capture_output=True, text=True, check=True)
    assert "cozyrender" in listing.stdout and "postrenderer/v1" in listing.stdout
    return helm4, helm_env


def objects(text: str) -> dict[tuple, dict]:
    found = {}
    for doc in yaml.safe_load_all(text):
        if doc:
            meta = doc["metadata"]
            meta.get("annotations", {}).pop("postrenderer.helm.sh/postrender-filename", None)
            if meta.get("annotations") == {}:
                del meta["annotations"]
            found[(doc["kind"], meta.get("namespace"), meta["name"])] = doc
    return found


def template(helm: Path, env: dict, *args: str | Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [helm, "template", "tenant-foo", CHARTS / "tenant", "-n", "tenant-root", *args],
        env=env, capture_output=True, text=True,
    )


def test_helm3_post_renderer_executable(helm3, helm_env):
    raw = template(helm3, helm_env, *GPU_VALUES)
    rendered = template(helm3, helm_env, *GPU_VALUES, "--post-renderer", "cozyrender", "--post-renderer-args", "post-render")
    assert raw.returncode == 0 and rendered.returncode == 0, rendered.stderr
    assert objects(rendered.stdout) == objects(post_render(raw.stdout.encode()).output.decode())
    got = objects(rendered.stdout)
    assert set(got[("ResourceQuota", "tenant-foo", "tenant-quota")]["spec"]["hard"]) == {"requests.cpu", "limits.cpu"}
    assert got[("Namespace", None, "tenant-foo")]["metadata"]["labels"]["namespace.cozystack.io/vgpu"] == "true"


def test_helm3_gpu_only_tenant_loses_quota_and_limitrange(helm3, helm_env):
    rendered = template(helm3, helm_env, *GPU_ONLY_VALUES, "--post-renderer", "cozyrender", "--post-renderer-args", "post-render")
    assert rendered.returncode == 0, rendered.stderr
    kinds = {key[0] for key in objects(rendered.stdout)}
    assert "ResourceQuota" not in kinds and "LimitRange" not in kinds and "Namespace" in kinds


def test_helm4_plugin_post_renders(helm4_with_plugins, tmp_path):
    helm4, env = helm4_with_plugins
    capture = tmp_path / "helm4-input.yaml"
    raw = template(helm4, {**env, "CAPTURE_FILE": str(capture)}, *GPU_VALUES, "--post-renderer", "capture")
    rendered = template(helm4, env, *GPU_VALUES, "--post-renderer", "cozyrender")
    assert raw.returncode == 0 and rendered.returncode == 0, rendered.stderr
    # What Helm 4 really sends: no `# Source:` lines, a filename annotation on every document.
    sent = capture.read_text()
    assert "# Source:" not in sent
    assert sent.count("postrenderer.helm.sh/postrender-filename") == len(objects(sent))
    expected = objects(post_render(sent.encode()).output.decode())
    assert objects(rendered.stdout) == expected
    assert expected[("Namespace", None, "tenant-foo")]["metadata"]["labels"]["namespace.cozystack.io/vgpu"] == "true"
    assert "gpuclass.cozystack.io" not in str(expected[("ResourceQuota", "tenant-foo", "tenant-quota")])


def test_helm4_and_helm3_agree(helm3, helm4_with_plugins):
    helm4, env = helm4_with_plugins
    three = template(helm3, env, *GPU_VALUES, "--post-renderer", "cozyrender", "--post-renderer-args", "post-render")
    four = template(helm4, env, *GPU_VALUES, "--post-renderer", "cozyrender")
    assert objects(three.stdout) == objects(four.stdout)


def broken_template(helm: Path, env: dict, *post_renderer: str) -> list[str]:
    return [str(helm), "template", "tenant-broken", str(DATA / "broken"), "-n", "tenant-root", *post_renderer]


MESSAGE = (
    "cozyrender post-render: error: document 1 (broken/templates/namespace.yaml): Namespace tenant-broken: "
    "annotation render.cozystack.io/vgpu-requested is set but render.cozystack.io/vgpu-parent is missing"
)


def test_helm3_failure_shows_cozyrender_message(helm3, helm_env):
    result = subprocess.run(
        broken_template(helm3, helm_env, "--post-renderer", "cozyrender", "--post-renderer-args", "post-render"),
        env=helm_env, capture_output=True, text=True,
    )
    assert result.returncode != 0
    assert result.stdout == ""
    assert MESSAGE in result.stderr


def test_helm4_failure_reaches_the_terminal(helm4_with_plugins, tmp_path):
    helm4, env = helm4_with_plugins
    command = broken_template(helm4, env, "--post-renderer", "cozyrender")
    # Without a terminal (CI) Helm 4 discards the plugin's stderr; cozyrender writes
    # its line to Helm's own stderr, next to Helm's words.
    plain = subprocess.run(command, env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL,
                           start_new_session=True)
    assert plain.returncode != 0
    assert 'plugin "cozyrender" exited with error' in plain.stderr
    assert plain.stderr.count(MESSAGE) == 1, plain.stderr
    # Under a pseudo-terminal (`script`), cozyrender's message reaches the user once.
    assert shutil.which("script"), "util-linux `script` is needed for the pseudo-terminal test"
    log = tmp_path / "cozyrender.log"
    under_tty = subprocess.run(
        ["script", "-qec", shlex.join(command), "/dev/null"],
        env={**env, "COZYRENDER_LOG": str(log)}, capture_output=True, text=True, stdin=subprocess.DEVNULL,
    )
    assert under_tty.returncode != 0
    assert under_tty.stdout.replace("\r\n", "\n").count(MESSAGE) == 1, under_tty.stdout
    assert 'plugin "cozyrender" exited with error' in under_tty.stdout
    assert MESSAGE in log.read_text()
