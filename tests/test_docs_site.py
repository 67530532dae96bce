"""The docs cannot drift from the tool (issue 20; issue 19 item 12).

- the site builds with `mkdocs build --strict`: a broken link or anchor, a page
  missing from the nav or any other warning fails `make test`;
- the generated reference and the render-path diagram are what their
  generators give for the code as it is (`--check`);
- the architecture page's module table names files that exist, and every
  module of the package;
- the README is a short front door whose links resolve;
- the three places where docs and tool disagreed: the `make dist` file names
  come from the charts and the plugin, and `make demo` renders with the Helm
  SDK, fetching nothing. (The third, `cozyrender --help`'s Helm forms, is
  run with both Helms in tests/test_cli_readme.py.)
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import yaml

from tests.conftest import ROOT

DOCS = ROOT / "docs"
README = ROOT / "README.md"


def run_tool(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    base = {**os.environ, "PYTHONPATH": str(ROOT), "NO_MKDOCS_2_WARNING": "1", **(env or {})}
    return subprocess.run([sys.executable, *args], cwd=ROOT, env=base, capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=600)


# ---------------------------------------------------------------- the site

def test_the_site_builds_in_strict_mode(tmp_path):
    result = run_tool("-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site"))
    assert result.returncode == 0, result.stderr
    assert "WARNING" not in result.stderr, result.stderr
    for page in ("index.html", "getting-started/index.html", "reference/cli/index.html",
                 "decisions/api-server-arbiter/index.html", "images/render-path.svg"):
        assert (tmp_path / "site" / page).is_file(), page


def test_strict_mode_fails_on_a_broken_link(tmp_path):
    """The build the test above runs is one that can fail: the same config over a
    copy of the docs with one link to a page that does not exist."""
    import shutil

    shutil.copytree(DOCS, tmp_path / "docs")
    page = tmp_path / "docs" / "index.md"
    page.write_text(page.read_text() + "\n[gone](no-such-page.md)\n")
    config = (ROOT / "mkdocs.yml").read_text()
    (tmp_path / "mkdocs.yml").write_text(config)
    result = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir",
                             str(tmp_path / "site")], cwd=tmp_path, capture_output=True, text=True,
                            env={**os.environ, "NO_MKDOCS_2_WARNING": "1"}, timeout=600)
    assert result.returncode != 0 and "no-such-page.md" in result.stderr


def nav_pages(node) -> list[str]:
    if isinstance(node, str):
        return [node]
    if isinstance(node, list):
        return [p for item in node for p in nav_pages(item)]
    if isinstance(node, dict):
        return [p for value in node.values() for p in nav_pages(value)]
    return []


def test_the_pages_other_branches_write_are_in_the_nav():
    config = yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=yaml.SafeLoader)
    pages = set(nav_pages(config["nav"]))
    for page in ("guides/in-the-cluster.md", "guides/flux-injection.md", "guides/pool-tree.md",
                 "guides/tenant-budget.md", "architecture.md"):
        assert page in pages, page
    assert {p for p in pages if not (DOCS / p).is_file()} == set()


# ---------------------------------------------------------------- generated, checked for drift

def test_the_generated_reference_is_current():
    result = run_tool("tools/gen_docs_reference.py", "--check")
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr


def test_the_readme_lists_every_output_format():
    """Issue 19 item 9: the README lists every -o value each command takes,
    the rows of the generated reference (read from the click options)."""
    section = (DOCS / "reference" / "cli.md").read_text().split("## Output formats", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `cozyrender")]
    readme = (DOCS.parent / "README.md").read_text()
    assert len(rows) >= 6 and all(row in readme for row in rows), [row for row in rows if row not in readme]


def test_the_reference_shows_no_python_internals():
    """Found by review: click's UNSET default marker was printed 33 times as
    `Sentinel.UNSET` in the options tables."""
    for page in (DOCS / "reference").glob("*.md"):
        text = page.read_text()
        for internal in ("Sentinel", "UNSET", "<function", "object at 0x"):
            assert internal not in text, f"{page.name}: {internal}"


def test_the_reference_lists_every_command_and_option():
    """Walked from the click group, so a command added there appears without an edit."""
    import click

    from cozyrender.cli import group

    page = (DOCS / "reference" / "cli.md").read_text()
    root = group()
    ctx = click.Context(root, info_name="cozyrender")
    seen = 0
    stack = [(root, ctx, "cozyrender")]
    while stack:
        command, cctx, path = stack.pop()
        assert f"## {path} {{" in page, path
        for param in command.get_params(cctx):
            for opt in getattr(param, "opts", []):
                if opt.startswith("-"):
                    assert f"`{opt}`" in page, (path, opt)
                    seen += 1
        if isinstance(command, click.Group):
            for name in command.list_commands(cctx):
                sub = command.get_command(cctx, name)
                stack.append((sub, click.Context(sub, info_name=name, parent=cctx), f"{path} {name}"))
    assert seen > 30


def test_the_reference_check_fails_on_a_stale_page(tmp_path):
    """--check can fail: over a copy of the pages with one edited by hand, it exits 1
    and shows the diff."""
    import shutil

    copy = tmp_path / "reference"
    shutil.copytree(DOCS / "reference", copy)
    page = copy / "gpuclass-crd.md"
    page.write_text(page.read_text().replace("GPUClass CRD", "GPUClass CRD (edited)", 1))
    result = run_tool("tools/gen_docs_reference.py", "--check", "--reference-dir", str(copy))
    assert result.returncode == 1 and "(edited)" in result.stdout and "gpuclass-crd.md" in result.stderr
    assert "cli.md" not in result.stderr  # the other pages are current


def test_the_render_path_diagram_is_current_and_draws_the_path():
    result = run_tool("tools/draw_render_path.py", "--check")
    assert result.returncode == 0, result.stdout + result.stderr
    svg = ET.parse(DOCS / "images" / "render-path.svg").getroot()
    texts = [t.text for t in svg.iter("{http://www.w3.org/2000/svg}text")]
    order = [next(i for i, t in enumerate(texts) if stage in t) for stage in
             ("chart + values", "Helm 3 or Helm 4", "cozyrender post-render", "Kubernetes API server",
              "cozyrender webhook")]
    assert order == sorted(order), texts
    assert (DOCS / "index.md").read_text().count("images/render-path.svg") == 1


# ---------------------------------------------------------------- the architecture table

def _table_paths() -> list[tuple[str, str]]:
    """(path, the whole row) for each file or folder named in the first column of the
    module table; a bare name after a path is in that path's folder."""
    text = (DOCS / "architecture.md").read_text()
    section = text[text.index("## Modules"):]
    section = section[:section.index("\n## ", 1)]
    found = []
    for line in section.splitlines():
        if not line.startswith("| `"):
            continue
        first = line.split(" | ")[0]
        folder = Path(".")
        for name in re.findall(r"`([^`]+)`", first):
            if "/" in name:
                path = Path(name)
                folder = path if name.endswith("/") else path.parent
            else:
                path = folder / name
            found.append((path.as_posix(), line))
    return found


def test_the_architecture_table_names_files_that_exist():
    paths = _table_paths()
    assert len(paths) > 60
    assert [p for p, _ in paths if not (ROOT / p).exists()] == []


def test_every_module_is_in_the_architecture_table():
    """A module is listed when its path, or a folder above it, is in the first column,
    or when its file name is given in the row of a module beside it."""
    paths = _table_paths()
    listed = {p.rstrip("/") for p, _ in paths}
    rows_by_folder: dict[str, str] = {}
    for path, line in paths:
        rows_by_folder.setdefault(Path(path).parent.as_posix(), "")
        rows_by_folder[Path(path).parent.as_posix()] += line
    missing = []
    for module in sorted((ROOT / "cozyrender").rglob("*.py")):
        if module.name in ("__init__.py", "__main__.py"):
            continue
        rel = module.relative_to(ROOT)
        candidates = {rel.as_posix(), *(p.as_posix() for p in rel.parents)}
        if candidates & listed:
            continue
        if f"`{module.name}`" in rows_by_folder.get(rel.parent.as_posix(), ""):
            continue
        missing.append(rel.as_posix())
    assert missing == [], f"add these to the module table in docs/architecture.md: {missing}"


# ---------------------------------------------------------------- the README

def test_the_readme_is_a_short_front_door():
    text = README.read_text()
    assert len(text.splitlines()) <= 200
    assert "make demo" in text and "make test" in text
    assert "docs/images/pool-tree.png" in text
    for page in ("docs/getting-started.md", "docs/reference/cli.md", "docs/architecture.md"):
        assert page in text, page


def test_the_readme_links_resolve():
    text = README.read_text()
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
    local = [link for link in links if "://" not in link]
    assert len(local) >= 5
    assert [link for link in local if not (ROOT / link).exists()] == []


# ---------------------------------------------------------------- issue 19 item 12

def packaged_charts() -> list[str]:
    """The chart folders `make dist` packages (its `helm4 package` line)."""
    match = re.search(r"helm4 package ((?:charts/\S+ )+)-d \$\(DIST\)/charts", (ROOT / "Makefile").read_text())
    assert match, "make dist no longer packages charts with `helm4 package charts/... -d $(DIST)/charts`"
    return match[1].split()


def expected_dist_names() -> set[str]:
    """What `make dist` writes, named as `python -m build`, `helm package` (name-version
    from Chart.yaml) and `helm plugin package` (from plugin.yaml) name them."""
    from tests.test_version import source_version

    version = source_version()
    names = {f"cozyrender-{version}-py3-none-any.whl", f"cozyrender-{version}.tar.gz"}
    for chart in packaged_charts():
        meta = yaml.safe_load((ROOT / chart / "Chart.yaml").read_text())
        names.add(f"{meta['name']}-{meta['version']}.tgz")
    plugin = yaml.safe_load((ROOT / "plugins" / "cozyrender" / "plugin.yaml").read_text())
    names.add(f"{plugin['name']}-{plugin['version']}.tgz")
    return names


ARCHIVE = re.compile(r"\b([a-z][a-z0-9-]*?)-\d+\.\d+\.\d+(?:-py3-none-any\.whl|\.tar\.gz|\.tgz)")


def test_every_archive_name_in_the_docs_is_one_make_dist_builds():
    """The README named tenant-0.1.0.tgz while the chart was 0.2.0: every archive name in
    the docs is computed from pyproject.toml, Chart.yaml and plugin.yaml."""
    expected = expected_dist_names()
    stems = {re.sub(r"-\d.*", "", name) for name in expected}
    files = [README, ROOT / "plugins" / "cozyrender" / "plugin.yaml", *DOCS.rglob("*.md")]
    named = [(f.relative_to(ROOT).as_posix(), m[0], m[1]) for f in files for m in ARCHIVE.finditer(f.read_text())]
    assert len(named) >= 8
    wrong = {(f, name) for f, name, stem in named if stem in stems and name not in expected}
    assert wrong == set()
    table = (DOCS / "guides" / "install.md").read_text()
    assert {name for name in expected if name not in table} == set()


def test_the_dist_table_lists_every_chart_make_dist_packages():
    assert {"charts/tenant", "charts/cozystack-basics"} <= set(packaged_charts())
    assert "plugin package plugins/cozyrender" in (ROOT / "Makefile").read_text()


def test_make_demo_renders_with_the_helm_sdk_and_fetches_nothing(tmp_path):
    """The quick start said `make demo` fetches the pinned binaries and renders through
    real Helm: it depends on the venv only, and runs with no helm anywhere."""
    makefile = (ROOT / "Makefile").read_text()
    demo = re.search(r"^demo:(.*)$", makefile, re.M)
    assert demo and "binaries" not in demo[1], demo
    env = {k: v for k, v in os.environ.items() if not k.startswith("COZYRENDER_")}
    bare = tmp_path / "bin"
    bare.mkdir()
    env["PATH"] = str(bare)  # no helm, no kubectl
    result = subprocess.run([sys.executable, "-m", "cozyrender.demo"], cwd=ROOT, env=env, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "Helm v4 SDK" in result.stdout
    for path in [README, *DOCS.rglob("*.md")]:
        for sentence in re.split(r"(?<=[.;:])\s", path.read_text()):
            if "make demo" in sentence:
                assert not re.search(r"real Helm|fetch(es)? the pinned", sentence), (path, sentence)
