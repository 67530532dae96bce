"""`make demo`: render the bundled tenant tree (examples/demo) with the Helm v4
SDK in process (no helm binary, nothing fetched) and the post-renderer, print
what each tenant got, and write the manifests.

The tree is a golden suite, so the demo also says whether every tenant still
renders exactly as its reviewed expected files say.
"""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

from cozyrender.entitlement import VGPU_LABEL
from cozyrender.golden import RAW_FILE, RENDERED_FILE, CaseResult, run_golden
from cozyrender.keys import in_budget_domain, strip_quota_prefix

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "demo"
OUTPUT = ROOT / "demo-output"


def summarise(result: CaseResult) -> dict[str, str]:
    """What one tenant got, read off its raw and post-rendered manifests."""
    raw = [o for o in yaml.safe_load_all(result.raw) if o]
    out = [o for o in yaml.safe_load_all(result.rendered) if o]
    tenant_ns = next((o["metadata"]["name"] for o in out
                      if o["kind"] == "Namespace" and VGPU_LABEL in (o["metadata"].get("labels") or {})), "-")
    raw_quota = next((o for o in raw if o["kind"] == "ResourceQuota"), None)
    quota = next((o for o in out if o["kind"] == "ResourceQuota"), None)
    budgets = sorted({strip_quota_prefix(k)
                      for k in ((raw_quota or {}).get("spec", {}).get("hard") or {}) if in_budget_domain(k)})
    if raw_quota is None:
        quota_state = "none declared"
    elif quota is None:
        quota_state = "dropped (GPU-only)"
    else:
        quota_state = f"kept, {len(quota['spec']['hard'])} keys"
    label = next((o["metadata"]["labels"][VGPU_LABEL] for o in out
                  if o["kind"] == "Namespace" and o["metadata"]["name"] == tenant_ns), "-")
    return {
        "tenant": tenant_ns,
        "GPU budgets": ", ".join(budgets) or "-",
        "ResourceQuota": quota_state,
        "LimitRange": "yes" if any(o["kind"] == "LimitRange" for o in out) else "no",
        "vgpu label": label,
    }


def table(rows: list[dict[str, str]]) -> str:
    columns = list(rows[0])
    widths = {c: max(len(c), *(len(r[c]) for r in rows)) for c in columns}
    lines = ["  ".join(c.ljust(widths[c]) for c in columns)]
    lines += ["  ".join(r[c].ljust(widths[c]) for c in columns) for r in rows]
    return "\n".join(line.rstrip() for line in lines)


def main() -> int:
    report = run_golden(EXAMPLE)
    for error in report.errors:
        print(f"cozyrender demo: error: {error}", file=sys.stderr)
    results = [r for r in report.results if r.rendered]
    if not results:
        return 1
    print("cozyrender demo: the tenant tree in examples/demo, rendered with the Helm v4 SDK "
          "and post-rendered\n")
    rows = sorted((summarise(r) for r in results), key=lambda row: (row["tenant"] != "tenant-root", row["tenant"]))
    print(table(rows))
    for result in results:
        folder = OUTPUT / result.case.name
        folder.mkdir(parents=True, exist_ok=True)
        (folder / RAW_FILE).write_text(result.raw, encoding="utf-8")
        (folder / RENDERED_FILE).write_text(result.rendered, encoding="utf-8")
        for warning in result.post_render_warnings:
            print(f"cozyrender demo: warning: {result.case.name}: post-render: {warning}", file=sys.stderr)
    print(f"\nFull manifests (Helm's raw output and the post-rendered one): {OUTPUT}/<case>/{{raw,rendered}}.yaml")
    failed = [r.case.name for r in report.results if not r.ok]
    if failed:
        print(f"cozyrender demo: error: these cases no longer match their expected files: {', '.join(failed)} "
              "(cozyrender golden examples/demo shows the diff)", file=sys.stderr)
        return 1
    print("Every tenant matches its reviewed golden files (cozyrender golden examples/demo).")
    return 0


if __name__ == "__main__":
    sys.exit(main())
