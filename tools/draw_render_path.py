"""The render-path diagram of the docs (docs/images/render-path.svg), drawn from
the description below so the picture is reviewed as text and cannot drift.

Rule: the SVG is a pure function of BOXES, ARROWS and NOTES; `--check` writes
nothing and exits 1 with a diff when the file on disk is not what they draw.

    python tools/draw_render_path.py           write the SVG
    python tools/draw_render_path.py --check   exit 1 when it is out of date
"""

from __future__ import annotations

import argparse
import difflib
import sys
from dataclasses import dataclass
from pathlib import Path
from xml.sax.saxutils import escape

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "docs" / "images" / "render-path.svg"

WIDTH, HEIGHT = 1170, 350
BOX_W, BOX_H = 200, 64
LINE = 15  # text line height


@dataclass(frozen=True)
class Box:
    key: str
    x: int
    y: int
    title: str
    lines: tuple[str, ...]
    fill: str = "#eef3fb"
    stroke: str = "#3b5b92"


@dataclass(frozen=True)
class Arrow:
    start: str
    end: str
    label: str = ""
    dashed: bool = False


# Top lane: a release run by Helm. Bottom lane: a release run by Flux.
# The API server and the webhook serve both.
BOXES = (
    Box("chart", 20, 80, "chart + values", ("charts/tenant,", "charts/cozystack-basics")),
    Box("helm", 330, 80, "Helm 3 or Helm 4", ("renders the templates",)),
    Box("post", 640, 80, "cozyrender post-render", ("budget keys out, vGPU label in;", "refuses what Helm reads otherwise"),
        fill="#e8f5e9", stroke="#2e7d32"),
    Box("api", 950, 80, "Kubernetes API server", ("admission chain",)),
    Box("hr", 20, 240, "HelmRelease", ("from cozystack-api", "or from Git")),
    Box("flux", 330, 240, "Flux helm-controller", ("renders, then applies", "the postRenderers")),
    Box("inject", 640, 240, "postRenderers", ("cozyrender flux (Git) or", "webhook injection"),
        fill="#e8f5e9", stroke="#2e7d32"),
    Box("hook", 950, 240, "cozyrender webhook", ("budgets and classes,", "race-safe"),
        fill="#e8f5e9", stroke="#2e7d32"),
)

ARROWS = (
    Arrow("chart", "helm", "inputs"),
    Arrow("helm", "post", "stdin"),
    Arrow("post", "api", "objects"),
    Arrow("api", "hook", "AdmissionReview"),
    Arrow("hr", "flux", "values"),
    Arrow("inject", "flux", "patches", dashed=True),
    Arrow("flux", "api", "patched objects"),
)

NOTES = (
    (20, 30, "How a tenant release reaches the cluster: every path applies the same post-render rules;"
             " the webhook checks the writes tenants make later."),
    (20, 52, "Green: cozyrender. Dashed: the patches are generated ahead of the render (Git) or"
             " injected into the HelmRelease by the webhook."),
    (950, 326, "a refusal names the field"),
)


def _centre(box: Box) -> tuple[float, float]:
    return box.x + BOX_W / 2, box.y + BOX_H / 2


def _edge(box: Box, towards: tuple[float, float]) -> tuple[float, float]:
    """Where the line from the box's centre towards a point leaves the box."""
    cx, cy = _centre(box)
    dx, dy = towards[0] - cx, towards[1] - cy
    if dx == 0 and dy == 0:
        return cx, cy
    scale = min((BOX_W / 2) / abs(dx) if dx else float("inf"), (BOX_H / 2) / abs(dy) if dy else float("inf"))
    return cx + dx * scale, cy + dy * scale


def _text(x: float, y: float, text: str, size: int = 13, weight: str = "normal", anchor: str = "middle",
          colour: str = "#1a1a1a") -> str:
    return (f'<text x="{x:g}" y="{y:g}" font-size="{size}" font-weight="{weight}" text-anchor="{anchor}" '
            f'fill="{colour}">{escape(text)}</text>')


def draw() -> str:
    boxes = {box.key: box for box in BOXES}
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-labelledby="title" '
        'font-family="DejaVu Sans, Helvetica, Arial, sans-serif">',
        "<!-- Drawn by tools/draw_render_path.py; do not edit: run `make docs-update`. -->",
        '<title id="title">The render path: chart, Helm, the cozyrender post-renderer, the Kubernetes API server'
        " and the cozyrender webhook; Flux's helm-controller applies the same rules as postRenderers</title>",
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="8" markerHeight="8" '
        'orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" fill="#555"/></marker></defs>',
        f'<rect x="0" y="0" width="{WIDTH}" height="{HEIGHT}" fill="#ffffff"/>',
    ]
    for x, y, note in NOTES:
        parts.append(_text(x, y, note, size=12, anchor="start", colour="#555555"))
    for arrow in ARROWS:
        start, end = boxes[arrow.start], boxes[arrow.end]
        x1, y1 = _edge(start, _centre(end))
        x2, y2 = _edge(end, _centre(start))
        dash = ' stroke-dasharray="6 4"' if arrow.dashed else ""
        parts.append(f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" stroke="#555" '
                     f'stroke-width="1.5" marker-end="url(#arrow)"{dash}/>')
        if arrow.label:
            mx, my = (x1 + x2) / 2, (y1 + y2) / 2
            if abs(x2 - x1) < abs(y2 - y1):  # mostly vertical: the label beside the line
                parts.append(_text(round(mx + 8, 1), round(my + 4, 1), arrow.label, size=11, anchor="start",
                                   colour="#333333"))
            else:
                parts.append(_text(round(mx, 1), round(my - 7, 1), arrow.label, size=11, colour="#333333"))
    for box in BOXES:
        parts.append(f'<rect x="{box.x}" y="{box.y}" width="{BOX_W}" height="{BOX_H}" rx="8" '
                     f'fill="{box.fill}" stroke="{box.stroke}" stroke-width="1.5"/>')
        cx = box.x + BOX_W / 2
        top = box.y + 20
        parts.append(_text(cx, top, box.title, weight="bold"))
        for i, line in enumerate(box.lines):
            parts.append(_text(cx, top + LINE * (i + 1), line, size=11, colour="#333333"))
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 with a diff when out of date")
    args = parser.parse_args(argv)
    svg = draw()
    old = OUT.read_text(encoding="utf-8") if OUT.exists() else ""
    if old == svg:
        return 0
    if args.check:
        sys.stdout.writelines(difflib.unified_diff(old.splitlines(keepends=True), svg.splitlines(keepends=True),
                                                   fromfile=f"{OUT.relative_to(ROOT)} (on disk)",
                                                   tofile=f"{OUT.relative_to(ROOT)} (drawn)"))
        print(f"out of date: {OUT.relative_to(ROOT)}; run `make docs-update`", file=sys.stderr)
        return 1
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(svg, encoding="utf-8")
    print(f"wrote {OUT.relative_to(ROOT)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
