"""The pool tree page (`cozyrender tree -o html`) in a real browser: Debian's
chromium, driven by Playwright (no browser download; `make chromium`
installs it). Every tenant drawn with the numbers of the JSON, over-commits
marked, the search box finding and revealing tenants (deep ones drawn on
demand), no horizontal overflow at 1280 px, and no network request at all."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

CHROMIUM = Path(os.environ.get("COZYRENDER_CHROMIUM", "/usr/bin/chromium"))
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync"]
EXAMPLE = ROOT / "examples" / "budgets" / "state"
OVERCOMMIT = ROOT / "tests" / "data" / "tree" / "overcommit.yaml"
APPS = "apps.cozystack.io/v1alpha1"


@pytest.fixture(scope="module")
def browser():
    if not os.access(CHROMIUM, os.X_OK):
        raise RuntimeError(f"{CHROMIUM} is missing: run `make chromium` (or `make test`)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        yield browser
        browser.close()


def generated_state(tmp_path: Path, tenants: int, seed: int = 3) -> Path:
    """Tenants over four levels with budgets, carve-outs and VMs (some over)."""
    rng = random.Random(seed)
    objects: list[dict] = [{"apiVersion": "v1", "kind": "Namespace",
                            "metadata": {"name": "tenant-root", "labels": {"namespace.cozystack.io/vgpu": "true"}}}]
    levels = [["tenant-root"]]
    sizes = [max(1, tenants // 20), max(1, tenants // 5)]
    sizes.append(tenants - sum(sizes))
    for level, size in enumerate(sizes):
        names = []
        for index in range(size):
            parent = rng.choice(levels[-1])
            name = f"t{level}n{index}"
            quotas = rng.choice([{}, {"gpuclass.cozystack.io/devices": rng.randint(1, 40)},
                                 {"a100.gpuclass.cozystack.io/devices": rng.randint(1, 9), "cpu": rng.randint(1, 64)},
                                 {"cpu": rng.randint(1, 64), "memory": f"{rng.randint(1, 64)}Gi"}])
            objects.append({"apiVersion": APPS, "kind": "Tenant", "metadata": {"name": name, "namespace": parent},
                            "spec": {"resourceQuotas": quotas, "gpu": {"vgpu": rng.random() < 0.6}}})
            names.append(("tenant-" if parent == "tenant-root" else parent + "-") + name)
        levels.append(names)
    every = [ns for level in levels for ns in level]
    for index in range(tenants):
        objects.append({"apiVersion": APPS, "kind": "VMInstance",
                        "metadata": {"name": f"vm{index}", "namespace": rng.choice(every)},
                        "spec": {"gpus": [{"class": rng.choice(["a100", "h100"]), "count": rng.randint(1, 3)}]}})
    path = tmp_path / f"state-{tenants}.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))
    return path


def tree(state: Path, *options: str) -> str:
    result = subprocess.run([sys.executable, "-m", "cozyrender", "tree", "--state", str(state), *options],
                            capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert result.returncode == 0, result.stderr
    return result.stdout


def open_page(browser, tmp_path: Path, state: Path, *options: str):
    html = tmp_path / "page.html"
    html.write_text(tree(state, "-o", "html", *options), encoding="utf-8")
    data = json.loads(tree(state, "-o", "json", *options))
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    requests: list[str] = []
    page.on("request", lambda request: requests.append(request.url))
    page.goto(html.as_uri())
    page.wait_for_selector("body[data-ready='1']")
    return page, data, requests, html


DRAWN = """() => [...document.querySelectorAll('#icicle .node')].map(node => ({
  ns: node.dataset.ns,
  over: node.firstElementChild.classList.contains('over'),
  rows: [...node.firstElementChild.querySelectorAll(':scope > .row')].map(row => ({
    key: row.dataset.key, over: row.classList.contains('over'),
    budget: row.querySelector('.fb').textContent, used: row.querySelector('.fu').textContent,
    carvedOut: row.querySelector('.fc').textContent, left: row.querySelector('.fl').textContent,
  })),
}))"""


def assert_numbers_equal_json(drawn: list[dict], data: dict, every: bool = True) -> None:
    by_namespace = {node["namespace"]: node for node in data["tenants"]}
    if every:
        assert sorted(d["ns"] for d in drawn) == sorted(by_namespace)
    for box in drawn:
        node = by_namespace[box["ns"]]
        expected = [{"key": row["key"], "over": row["overCommitted"], **{k: str(row[k]) for k in ("budget", "used", "carvedOut", "left")}}
                    for row in node["keys"]]
        assert box["rows"] == expected, box["ns"]
        assert box["over"] == any(row["overCommitted"] for row in node["keys"])


def no_horizontal_overflow(page) -> None:
    widths = page.evaluate("() => [document.documentElement.scrollWidth, document.body.scrollWidth, window.innerWidth]")
    assert widths[0] <= 1280 and widths[1] <= 1280, widths


@pytest.mark.parametrize("state", [EXAMPLE, OVERCOMMIT], ids=["example", "overcommit"])
def test_every_tenant_with_the_numbers_of_the_json(browser, tmp_path, state):
    page, data, requests, html = open_page(browser, tmp_path, state)
    assert_numbers_equal_json(page.evaluate(DRAWN), data)
    no_horizontal_overflow(page)
    # every tenant's details, one by one, and its hover summary: still no overflow
    for node in data["tenants"]:
        page.click(f".node[data-ns='{node['namespace']}'] > .box .head")
        assert page.get_attribute("#details", "data-ns") == node["namespace"]
        keys = page.eval_on_selector_all("#details tr[data-key]", "rows => rows.map(r => [r.dataset.key, "
                                         "r.querySelector('.b').textContent, r.querySelector('.l').textContent])")
        assert keys == [[row["key"], str(row["budget"]), str(row["left"])] for row in node["keys"]]
        page.hover(f".node[data-ns='{node['namespace']}'] > .box .head")
        assert page.is_visible("#tip")
        no_horizontal_overflow(page)
    assert requests == [html.as_uri()]
    page.close()


def test_a_generated_tree_with_filters(browser, tmp_path):
    state = generated_state(tmp_path, 120)
    for options in [(), ("--class", "a100"), ("--depth", "2")]:
        page, data, requests, html = open_page(browser, tmp_path, state, *options)
        assert_numbers_equal_json(page.evaluate(DRAWN), data)
        assert data["summary"]["overCommitted"] > 0 or options  # the generator over-commits some pools
        assert page.locator(".box.over").count() == sum(
            1 for n in data["tenants"] if any(r["overCommitted"] for r in n["keys"]))
        no_horizontal_overflow(page)
        assert requests == [html.as_uri()]
        page.close()


def test_search_finds_and_reveals(browser, tmp_path):
    page, data, requests, html = open_page(browser, tmp_path, EXAMPLE)
    page.fill("#search", "ml")
    page.wait_for_selector("#results li[data-i]")
    found = page.eval_on_selector_all("#results li[data-i] small", "items => items.map(i => i.textContent)")
    assert found == ["tenant-acme-ml"]
    assert page.locator(".box.hit").count() == 1
    page.press("#search", "Enter")
    assert page.get_attribute("#details", "data-ns") == "tenant-acme-ml"
    assert page.locator(".node[data-ns='tenant-acme-ml'] > .box.sel").count() == 1
    page.fill("#search", "nothing-like-this")
    page.wait_for_selector("#results li.count")
    assert page.text_content("#results li.count") == "no tenant matches"
    assert requests == [html.as_uri()]
    page.close()


def test_deep_levels_are_drawn_on_demand(browser, tmp_path):
    """A large tree draws only the levels that fit; searching a deep tenant
    draws its level and selects it, with the JSON's numbers."""
    state = generated_state(tmp_path, 1500)
    page, data, requests, html = open_page(browser, tmp_path, state)
    drawn = page.evaluate(DRAWN)
    assert len(drawn) < len(data["tenants"]) and len(drawn) <= 400 + 75
    assert_numbers_equal_json(drawn, data, every=False)
    deep = next(n for n in data["tenants"] if n["depth"] == 3 and n["keys"])
    assert page.locator(f".node[data-ns='{deep['namespace']}']").count() == 0
    page.fill("#search", deep["namespace"])
    page.wait_for_selector("#results li[data-i]")
    page.press("#search", "Enter")
    assert page.get_attribute("#details", "data-ns") == deep["namespace"]
    drawn = page.evaluate(DRAWN)
    assert deep["namespace"] in [d["ns"] for d in drawn]
    assert_numbers_equal_json(drawn, data, every=False)
    # the crumbs lead back to the top
    page.click("#crumbs a[data-zoom='0']")
    assert page.locator(f".node[data-ns='{deep['namespace']}']").count() == 0
    no_horizontal_overflow(page)
    assert requests == [html.as_uri()]
    page.close()


def test_text_from_the_state_is_text(browser, tmp_path):
    """A key or a name from the state never becomes markup or script: the
    data is inert JSON in the page and the page writes it as text."""
    hostile = "</script><img src=x onerror=alert(1)><!--"
    state = tmp_path / "hostile.yaml"
    state.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "tenant-root"}},
        {"apiVersion": APPS, "kind": "Tenant", "metadata": {"name": "acme", "namespace": "tenant-root"},
         "spec": {"resourceQuotas": {hostile: 1, "cpu": "1"}}}]}))
    page, data, requests, html = open_page(browser, tmp_path, state)
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    assert_numbers_equal_json(page.evaluate(DRAWN), data)
    page.click(".node[data-ns='tenant-acme'] > .box .head")
    assert hostile in page.text_content("#details")
    assert page.locator("img").count() == 0 and dialogs == []
    assert requests == [html.as_uri()]
    page.close()
