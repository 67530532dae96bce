"""The pool tree at scale (issue 18 item 4): the bench state of
bench_budgets.py (10,000 tenants five levels deep, 100,000 VMs and worker
pools, 200,000 pods) as `cozyrender tree` lays it out, in all three
outputs, side by side with `check`'s audit of the same state (the peer:
the tree reads the same index and runs the same audit, then groups and
lays out), in process and as whole processes reading the state file.
Then the HTML page in Debian's chromium: from navigation to
interactive (the page's ready mark), and a search that reveals a deep
tenant (target: interactive in under 2 s). Prints figures and ratios;
asserts nothing."""

from __future__ import annotations

import gc
import importlib.util
import json
import os
import tempfile
import time
from pathlib import Path

from cozyrender.budgets import audit, index_state
from cozyrender.tree import build_tree
from cozyrender.tree.html import render_html
from cozyrender.tree.jsonout import tree_data
from cozyrender.tree.text import render_text

HERE = Path(__file__).resolve().parent
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync"]


def _generate():
    spec = importlib.util.spec_from_file_location("bench_budgets", HERE / "bench_budgets.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.generate_state()


def _timed(fn, *args, **kwargs):
    start = time.perf_counter()
    result = fn(*args, **kwargs)
    return result, time.perf_counter() - start


def run() -> None:
    objects = _generate()
    gc.freeze()
    runs = []
    for _ in range(3):
        state, index_s = _timed(index_state, objects)
        findings, audit_s = _timed(audit, state)
        runs.append((index_s + audit_s, index_s, audit_s))
    check_total, index_s, audit_s = sorted(runs)[1]
    print(f"check's audit (median of 3): index {index_s:.2f} s + findings {audit_s:.2f} s = {check_total:.2f} s")

    tree, build_s = _timed(build_tree, state, findings)
    nodes = len(tree.nodes)
    text, text_s = _timed(render_text, tree)
    data, data_s = _timed(tree_data, tree)
    dumped, dump_s = _timed(json.dumps, data, indent=2)
    page, html_s = _timed(render_html, tree)
    json_s = data_s + dump_s
    print(f"tree model of {nodes:,} namespaces: {build_s:.2f} s ({build_s / check_total:.2f}x the audit)")
    for name, took, size in [("tree (terminal)", text_s, len(text.encode())), ("json", json_s, len(dumped.encode())),
                             ("html", html_s, len(page.encode()))]:
        whole = check_total + build_s + took
        print(f"  -o {name:<15} layout {took:.2f} s, {size / 2**20:.1f} MiB; index + audit + tree + layout "
              f"{whole:.2f} s = {whole / check_total:.2f}x check's audit alone")

    _whole_processes(objects)

    if not os.access(CHROMIUM, os.X_OK):
        print(f"  chromium: {CHROMIUM} is missing (make chromium); the page was not opened")
        return
    from playwright.sync_api import sync_playwright

    deep = next(node.namespace for node in tree.nodes.values() if node.depth == 5 and node.keys)
    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as playwright:
        path = Path(tmp) / "pool-tree.html"
        path.write_text(page, encoding="utf-8")
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        opened, searched, boxes = [], [], 0
        for _ in range(3):
            tab = browser.new_page(viewport={"width": 1280, "height": 900})
            start = time.perf_counter()
            tab.goto(path.as_uri())
            tab.wait_for_selector("body[data-ready='1']")
            opened.append(time.perf_counter() - start)
            boxes = tab.locator("#icicle .node").count()
            start = time.perf_counter()
            tab.fill("#search", deep)
            tab.wait_for_selector("#results li[data-i]")
            tab.press("#search", "Enter")
            tab.wait_for_selector(f"#details[data-ns='{deep}']")
            searched.append(time.perf_counter() - start)
            tab.close()
        browser.close()
    opened.sort()
    searched.sort()
    print(f"  html in chromium: navigation to interactive {opened[1]:.2f} s median of 3 (best {opened[0]:.2f} s, "
          f"worst {opened[2]:.2f} s; target < 2 s), {boxes} boxes drawn of {nodes:,}; a search revealing a "
          f"tenant five levels deep {searched[1] * 1e3:.0f} ms")


def _whole_processes(objects) -> None:
    """As a user runs them: `cozyrender check --state` (the audit) beside
    `cozyrender tree --state -o X`, each a whole process reading the same
    `kubectl -o json` file."""
    import subprocess
    import sys

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "state.json"
        path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))
        command = [sys.executable, "-m", "cozyrender"]
        env = dict(os.environ, PYTHONPATH=str(HERE.parent))

        def timed(*args: str) -> float:
            start = time.perf_counter()
            done = subprocess.run([*command, *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
            took = time.perf_counter() - start
            if done.returncode not in (0, 1):
                raise RuntimeError(done.stderr.decode())
            return took

        check = timed("check", "--state", str(path))
        print(f"whole process on the {path.stat().st_size / 2**20:.0f} MiB state file: cozyrender check (audit) "
              f"{check:.1f} s")
        for output in ("tree", "json", "html"):
            took = timed("tree", "--state", str(path), "-o", output)
            print(f"  cozyrender tree -o {output:<4} {took:.1f} s ({took / check:.2f}x check)")


if __name__ == "__main__":
    run()
