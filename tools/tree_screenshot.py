"""Regenerate docs/images/pool-tree.png (`make screenshot`): the pool tree
page of the bundled example (examples/budgets/state), opened in Debian's
chromium through Playwright (no browser download), with one tenant
selected and hovered so the picture shows the details and the tooltip."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync"]


def main(out: str = "docs/images/pool-tree.png", state: str = "examples/budgets/state", select: str = "tenant-acme",
         hover: str = "tenant-acme-web") -> None:
    from playwright.sync_api import sync_playwright

    page_html = subprocess.run(
        [sys.executable, "-m", "cozyrender", "tree", "--state", str(ROOT / state), "-o", "html"],
        check=True, capture_output=True, text=True, cwd=ROOT).stdout
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "pool-tree.html"
        path.write_text(page_html, encoding="utf-8")
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            page = browser.new_page(viewport={"width": 1280, "height": 800}, device_scale_factor=1)
            page.goto(path.as_uri())
            page.wait_for_selector("body[data-ready='1']")
            if select:
                page.click(f".node[data-ns='{select}'] > .box")
            if hover:
                page.hover(f".node[data-ns='{hover}'] > .box .head")
            page.screenshot(path=str(ROOT / out), full_page=True)
            browser.close()
    print(f"wrote {out}")


if __name__ == "__main__":
    main(*sys.argv[1:])
