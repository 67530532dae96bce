"""The Helm examples run as written (issue 12 item 9), those of the Helm guide
(docs/guides/helm.md, moved there from the README) and those of `cozyrender
--help` (issue 19 item 12): every file they name exists, and the Helm 3 and
Helm 4 commands (as `helm template`, which needs no cluster) post-render
through the real binaries, each form with the Helm it is labelled for."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import yaml

from tests.conftest import ROOT

GUIDE = (ROOT / "docs" / "guides" / "helm.md").read_text()


def helm_commands(flag: str) -> list[list[str]]:
    """`helm install ...` commands of the guide's sh blocks (continuation lines joined)."""
    blocks = re.findall(r"```sh\n(.*?)```", GUIDE, re.S)
    commands = []
    for block in blocks:
        for command in block.replace("\\\n", " ").splitlines():
            if command.startswith("helm install ") and flag in command:
                commands.append(shlex.split(command.split("#")[0]))
    return commands


def files_named(command: list[str]) -> list[str]:
    return [command[i + 1] for i, arg in enumerate(command[:-1]) if arg in ("-f", "--values")]


def test_the_helm_examples_name_files_that_exist():
    commands = helm_commands("--post-renderer cozyrender")
    assert len(commands) >= 2, commands
    for command in commands:
        assert (ROOT / command[3]).is_dir(), command  # the chart
        for name in files_named(command):
            assert (ROOT / name).is_file(), (command, name)


def run_as_template(helm: Path, command: list[str], env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([str(helm), "template", *command[2:]], cwd=ROOT, env=env, capture_output=True,
                          text=True, stdin=subprocess.DEVNULL, timeout=120)


def test_the_helm_examples_run(helm3, helm4, tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "HELM_PLUGINS"}
    for name in ("CONFIG", "DATA", "CACHE"):
        env[f"HELM_{name}_HOME"] = str(tmp_path / "helm4" / name.lower())
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    installed = subprocess.run([str(helm4), "plugin", "install", "plugins/cozyrender"], cwd=ROOT, env=env,
                               capture_output=True, text=True)
    assert installed.returncode == 0, installed.stderr
    helm3_command = next(c for c in helm_commands("--post-renderer-args post-render"))
    helm4_command = next(c for c in helm_commands("--post-renderer cozyrender") if "--post-renderer-args" not in c)
    # Helm 3 with its own plugin folder, as the guide says: no warning about the Helm 4 plugin.
    three = run_as_template(helm3, helm3_command, {**env, "HELM_PLUGINS": str(tmp_path / "helm3-plugins")})
    four = run_as_template(helm4, helm4_command, env)
    assert three.returncode == 0 and three.stderr == "", three.stderr
    assert four.returncode == 0 and four.stderr == "", four.stderr
    for output in (three.stdout, four.stdout):  # entitled: the parent's values and gpu.vgpu=true
        namespace = next(d for d in yaml.safe_load_all(output) if d and d["kind"] == "Namespace")
        assert namespace["metadata"]["labels"]["namespace.cozystack.io/vgpu"] == "true"
    # and Helm 3 sharing Helm 4's plugin folder warns, which is why the guide separates them
    shared = run_as_template(helm3, helm3_command, env)
    assert shared.returncode == 0 and 'unknown field "apiVersion"' in shared.stderr


def help_helm_lines() -> dict[str, list[str]]:
    """The `helm ...` examples of `cozyrender --help`, by the Helm version each is labelled with."""
    result = subprocess.run([sys.executable, "-m", "cozyrender", "--help"], cwd=ROOT, capture_output=True,
                            text=True, stdin=subprocess.DEVNULL)
    assert result.returncode == 0, result.stderr
    lines: dict[str, list[str]] = {}
    for line in result.stdout.splitlines():
        line = line.strip()
        if not line.startswith("helm "):
            continue
        command, _, comment = line.partition("#")
        label = re.search(r"\bHelm ([34])\b", comment)
        assert label, f"`cozyrender --help` shows a helm command without saying which Helm it is for: {line}"
        lines[label[1]] = shlex.split(command)
    return lines


def test_the_help_labels_each_helm_form_and_each_runs_with_its_helm(helm3, helm4, tmp_path):
    """Issue 19 item 12: the help showed the Helm 3 form without saying so, and it fails under Helm 4."""
    lines = help_helm_lines()
    assert set(lines) == {"3", "4"}, lines
    assert "--post-renderer-args" in lines["3"] and "--post-renderer-args" not in lines["4"]
    env = {k: v for k, v in os.environ.items() if k != "HELM_PLUGINS"}
    for name in ("CONFIG", "DATA", "CACHE"):
        env[f"HELM_{name}_HOME"] = str(tmp_path / "helm4" / name.lower())
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    installed = subprocess.run([str(helm4), "plugin", "install", "plugins/cozyrender"], cwd=ROOT, env=env,
                               capture_output=True, text=True)
    assert installed.returncode == 0, installed.stderr
    for version, helm, extra in (("3", helm3, {"HELM_PLUGINS": str(tmp_path / "helm3-plugins")}), ("4", helm4, {})):
        command = lines[version]
        result = subprocess.run([str(helm), *command[1:]], cwd=ROOT, env={**env, **extra}, capture_output=True,
                                text=True, stdin=subprocess.DEVNULL, timeout=120)
        assert result.returncode == 0 and result.stderr == "", (version, result.stderr)
        assert "render.cozystack.io/vgpu-requested" not in result.stdout  # post-rendered
    # and each form fails under the other Helm, which is why the labels matter
    wrong = subprocess.run([str(helm4), *lines["3"][1:]], cwd=ROOT, env=env, capture_output=True, text=True,
                           stdin=subprocess.DEVNULL, timeout=120)
    assert wrong.returncode != 0 and "drop --post-renderer-args" in wrong.stderr
