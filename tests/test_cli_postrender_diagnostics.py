"""Post-render diagnostics reach the user (issue 12 item 2): warnings go where
errors go, and Helm configuration mistakes are one line naming the fix; under
the real Helm 3 and Helm 4 binaries, in CI (no terminal), the reason shows in
Helm's own output. All of it stays off click (the hot path)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import CHARTS, ROOT

COZY = [sys.executable, "-m", "cozyrender"]
# The tenant chart's schema refuses a malformed budget key; a hoster's chart
# without that schema renders it, as --skip-schema-validation shows.
MALFORMED = ["--skip-schema-validation", "--set", "resourceQuotas.cpu=1",
             "--set", "resourceQuotas.x\\.y\\.gpuclass\\.cozystack\\.io/memory=1"]
# (the document's number differs: Helm 4 sends the RBAC documents in another place)
WARNING = ("(tenant/templates/quota.yaml): removed malformed GPU budget key "
           "'requests.x.y.gpuclass.cozystack.io/memory'")


def warned_once(stderr: str) -> bool:
    lines = [line for line in stderr.splitlines() if WARNING in line]
    return len(lines) == 1 and lines[0].startswith("cozyrender post-render: warning: document ")
HELM4_FIX = "Helm 4 runs the plugin as `cozyrender post-render` already; drop --post-renderer-args"
HELM3_FIX = "as a Helm 3 post-renderer add `--post-renderer-args post-render`"


def cozy(args: list[str], data: bytes = b"", **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([*COZY, *args], input=data, capture_output=True, timeout=60,
                          env={**os.environ, **env}, start_new_session=True)


def without(env: dict, *names: str) -> dict:
    return {k: v for k, v in env.items() if k not in names}


# ---------------------------------------------------------------- the process alone

def test_warnings_reach_the_log_like_errors(tmp_path):
    log = tmp_path / "cozyrender.log"
    stream = b"kind: ResourceQuota\nmetadata: {name: q}\nspec:\n  hard:\n    cpu: 1\n    x.y.gpuclass.cozystack.io/memory: 1\n"
    result = cozy(["post-render"], stream, COZYRENDER_LOG=str(log))
    assert result.returncode == 0 and result.stdout.endswith(b"cpu: 1\n")
    line = result.stderr.decode()
    assert line.startswith("cozyrender post-render: warning: document 1: ") and line.count("warning") == 1
    assert log.read_text() == line


@pytest.mark.parametrize(("args", "env", "fix"), [
    (["post-render", "post-render"], {"HELM_PLUGIN_NAME": "cozyrender"}, HELM4_FIX),
    (["post-render", "post-render"], {}, "as a Helm 3 post-renderer give exactly `--post-renderer-args post-render`"),
    (["post-render", "--bogus"], {}, "unexpected argument '--bogus'"),
    ([], {}, HELM3_FIX),  # Helm 3 without --post-renderer-args: no command, the release on stdin
])
def test_usage_errors_on_the_post_render_path_are_one_line(args, env, fix, tmp_path):
    log = tmp_path / "cozyrender.log"
    result = cozy(args, b"kind: ConfigMap\n", COZYRENDER_LOG=str(log), **env)
    stderr = result.stderr.decode()
    assert result.returncode == 2 and result.stdout == b""
    assert stderr.count("\n") == 1 and fix in stderr, stderr
    assert "Usage:" not in stderr and "Traceback" not in stderr
    assert log.read_text() == stderr


def test_usage_errors_and_warnings_stay_off_click():
    probe = (
        "import sys, io\n"
        "sys.stdin = io.TextIOWrapper(io.BytesIO(sys.argv[2].encode()))\n"
        "sys.stdout = io.TextIOWrapper(io.BytesIO())\n"
        "sys.stderr = io.TextIOWrapper(io.BytesIO())\n"
        "from cozyrender.cli import main\n"
        "try:\n"
        "    main(sys.argv[1].split())\n"
        "except SystemExit as exit:\n"
        "    print(exit.code, file=sys.__stdout__)\n"
        "print(' '.join(sorted(sys.modules)), file=sys.__stdout__)\n"
    )
    warned = "kind: ResourceQuota\nmetadata: {name: q}\nspec:\n  hard: {cpu: 1, x.y.gpuclass.cozystack.io/memory: 1}\n"
    for args, status in (("post-render", "0"), ("post-render post-render", "2")):
        result = subprocess.run([sys.executable, "-c", probe, args, warned], capture_output=True, text=True,
                                check=True, stdin=subprocess.DEVNULL)
        code, modules = result.stdout.splitlines()
        assert code == status
        loaded = set(modules.split())
        for heavy in ("click", "cozyrender.commands", "cozyrender.render", "json"):
            assert not any(m == heavy or m.startswith(heavy + ".") for m in loaded), (args, heavy)


# ---------------------------------------------------------------- under the real Helm binaries, in CI

@pytest.fixture
def helm_env(tmp_path) -> dict[str, str]:
    """A Helm home per test (plugins too), the venv's `cozyrender` first on PATH."""
    env = without(dict(os.environ), "HELM_PLUGINS", "COZYRENDER_LOG")
    for name in ("CONFIG", "DATA", "CACHE"):
        env[f"HELM_{name}_HOME"] = str(tmp_path / "helm" / name.lower())
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return env


def helm_template(helm: Path, env: dict, *args: str, chart: Path = CHARTS / "tenant",
                  release: str = "tenant-foo") -> subprocess.CompletedProcess:
    # no terminal, as in CI: a new session without a controlling tty, stdin closed
    return subprocess.run([helm, "template", release, chart, "-n", "tenant-root", *args], env=env,
                          capture_output=True, text=True, stdin=subprocess.DEVNULL, start_new_session=True,
                          timeout=120)


@pytest.fixture
def helm4_env(helm4, helm_env) -> dict[str, str]:
    installed = subprocess.run([helm4, "plugin", "install", ROOT / "plugins" / "cozyrender"], env=helm_env,
                               capture_output=True, text=True)
    assert installed.returncode == 0, installed.stderr
    return helm_env


def test_helm4_in_ci_shows_warnings(helm4, helm4_env):
    result = helm_template(helm4, helm4_env, *MALFORMED, "--post-renderer", "cozyrender")
    assert result.returncode == 0, result.stderr
    assert "x.y.gpuclass" not in result.stdout
    assert warned_once(result.stderr), result.stderr


def test_helm3_in_ci_shows_warnings(helm3, helm_env):
    result = helm_template(helm3, helm_env, *MALFORMED, "--post-renderer", "cozyrender",
                           "--post-renderer-args", "post-render")
    assert result.returncode == 0, result.stderr
    assert warned_once(result.stderr), result.stderr


def test_helm4_with_helm3_arguments_names_the_fix(helm4, helm4_env, tmp_path):
    log = tmp_path / "why.log"
    result = helm_template(helm4, {**helm4_env, "COZYRENDER_LOG": str(log)}, "--post-renderer", "cozyrender",
                           "--post-renderer-args", "post-render")
    assert result.returncode != 0 and result.stdout == ""
    assert 'plugin "cozyrender" exited with error' in result.stderr
    assert result.stderr.count(HELM4_FIX) == 1, result.stderr
    assert HELM4_FIX in log.read_text()


def test_helm3_without_arguments_names_the_fix(helm3, helm_env):
    result = helm_template(helm3, helm_env, "--post-renderer", "cozyrender")
    assert result.returncode != 0 and result.stdout == ""
    assert HELM3_FIX in result.stderr and "Usage:" not in result.stderr, result.stderr


@pytest.mark.parametrize("version", ["helm3", "helm4"])
def test_troubleshooting_log_recipe(version, request, helm_env, tmp_path):
    """The README's recipe: COZYRENDER_LOG names a file; the reason is in it after Helm fails."""
    helm = request.getfixturevalue(version)
    env = request.getfixturevalue("helm4_env") if version == "helm4" else helm_env
    args = ["--post-renderer", "cozyrender"] + (["--post-renderer-args", "post-render"] if version == "helm3" else [])
    log = tmp_path / "cozyrender.log"
    result = helm_template(helm, {**env, "COZYRENDER_LOG": str(log)}, *args,
                           chart=ROOT / "tests" / "data" / "helm" / "broken", release="tenant-broken")
    assert result.returncode != 0
    reason = log.read_text()
    assert reason.startswith("cozyrender post-render: error: document 1 (broken/templates/namespace.yaml)")
    assert reason.count("\n") == 1 and reason in result.stderr
