"""The pool tree for a terminal: the tenant tree on the left, one row per
declared key with its figures in aligned columns (BUDGET, USED, CARVED
OUT, LEFT), and under each row who carves out and who reserves; under each
tenant its charge towards the pool root above, its vGPU entitlement and the
audit's findings about it.

The rule: the layout only; every figure and sentence comes from the tree
model. Colour only when asked (`colour=True`: the command asks on a
terminal without NO_COLOR), never escape codes in a pipe.

Pure: returns the text.
"""

from __future__ import annotations

from dataclasses import dataclass

from cozyrender.budgets.audit import ERROR

from .model import GPU, PLATFORM, KeyRow, Node, Tree

MAX_LISTED = 5  # objects or namespaces listed under a row; the JSON has them all
HEADERS = ("TENANT", "KEY", "BUDGET", "USED", "CARVED OUT", "LEFT")

_STYLES = {"bold": "1", "dim": "2", "red": "31", "green": "32", "yellow": "33", "cyan": "36"}


class _Paint:
    def __init__(self, colour: bool) -> None:
        self.colour = colour

    def __call__(self, text: str, *styles: str) -> str:
        styles = tuple(s for s in styles if s)
        if not self.colour or not styles or not text:
            return text
        codes = ";".join(_STYLES[s] for s in styles)
        return f"\x1b[{codes}m{text}\x1b[0m"


@dataclass
class _Line:
    tenant: str  # tree prefix and name (plain, for widths)
    tenant_styled: str
    row: KeyRow | None = None
    text: str = ""  # a detail line (spans the key and figure columns)
    text_styles: tuple[str, ...] = ()
    indent: str = ""  # a row's details sit under its key


def render_text(tree: Tree, colour: bool = False) -> str:
    paint = _Paint(colour)
    lines: list[_Line] = []
    _walk(tree, tree.root, "", True, True, lines, paint)

    key_width = max([len(HEADERS[1])] + [len(line.row.key) for line in lines if line.row])
    tenant_width = max([len(HEADERS[0])] + [len(line.tenant) for line in lines if line.row or not line.text])
    figures = [[line.row.amount(v) for v in (line.row.budget, line.row.used, line.row.carved_out, line.row.left)]
               for line in lines if line.row]
    widths = [max([len(header)] + [len(f[i]) for f in figures]) for i, header in enumerate(HEADERS[2:])]

    out = [_header(tree, paint)]
    head = [HEADERS[0].ljust(tenant_width), HEADERS[1].ljust(key_width)]
    head += [header.rjust(width) for header, width in zip(HEADERS[2:], widths)]
    out.append(paint("   ".join(head).rstrip(), "bold"))
    for line in lines:
        pad = " " * (tenant_width - len(line.tenant))
        if line.row is not None:
            row = line.row
            values = [row.amount(v) for v in (row.budget, row.used, row.carved_out, row.left)]
            cells = [row.key.ljust(key_width)] + [v.rjust(w) for v, w in zip(values, widths)]
            left_style = "red" if row.over_committed else ("yellow" if row.left == 0 else "green")
            cells[-1] = paint(cells[-1], left_style, "bold" if row.over_committed else "")
            if row.over_committed:
                cells[0] = paint(cells[0], "red")
            text = "   ".join(cells)
            if row.over_committed:
                text += "   " + paint(f"OVER by {row.amount(-row.left)}", "red", "bold")
            out.append(f"{line.tenant_styled}{pad}   {text}".rstrip())
        elif line.text:
            out.append(f"{line.tenant_styled}{pad}   {line.indent}{paint(line.text, *line.text_styles)}".rstrip())
        else:
            out.append(line.tenant_styled.rstrip())
    out.append(_summary(tree))
    return "\n".join(out) + "\n"


def _header(tree: Tree, paint: _Paint) -> str:
    state = "on" if tree.platform_vgpu else "off"
    text = f"platform vGPU: {state} ({tree.platform_source})"
    if tree.gpu_budgets_nest:  # said only when on: off is the seed's rule
        text += "; GPU budgets nest (_cluster.gpu-budgets-nest)"
    filters = []
    if tree.root != "tenant-root":
        filters.append(f"subtree {tree.root}")
    if tree.gpu_class is not None:
        filters.append(f"keys covering class {tree.gpu_class}")
    if tree.depth is not None:
        filters.append(f"{tree.depth} level{'s' if tree.depth != 1 else ''} deep")
    if filters:
        text += "; showing " + ", ".join(filters)
    return paint(text, "dim")


def _summary(tree: Tree) -> str:
    nodes = list(tree.shown())
    pools = sum(1 for n in nodes if n.budget_root or n.ordinary_root)
    over = sum(1 for n in nodes for row in n.keys if row.over_committed)
    findings = [f for n in nodes for f in n.findings] + list(tree.findings)
    errors = sum(1 for f in findings if f.severity == ERROR)
    warnings = len(findings) - errors
    text = (f"{_plural(len(nodes), 'namespace')}, {_plural(pools, 'pool root')}, "
            f"{_plural(over, 'key')} over budget, {_plural(errors, 'error')}, {_plural(warnings, 'warning')}")
    if tree.hidden:
        text += f" ({tree.hidden} more hidden by the filters)"
    return text


def _plural(count: int, word: str) -> str:
    return f"{count} {word if count == 1 else word + 's'}"


def _walk(tree: Tree, namespace: str, above: str, last: bool, top: bool, lines: list[_Line], paint: _Paint) -> None:
    """Depth-first, iteratively (a deep tree must not exhaust the stack)."""
    stack = [(namespace, above, last, top)]
    while stack:
        namespace, above, last, top = stack.pop()
        node = tree.nodes[namespace]
        branch = "" if top else ("└── " if last else "├── ")
        below = "" if top else above + ("    " if last else "│   ")
        name = _name(node, top)
        styled_name = paint(name, "bold", "red" if node.over_committed else "")
        marks = _marks(node)
        first = f"{above}{branch}{name}{marks}"
        first_styled = f"{paint(above + branch, 'dim')}{styled_name}{paint(marks, 'cyan')}"
        rest = below + ("│   " if node.children else "    ")
        rest_styled = paint(rest, "dim")
        rows = node.keys
        if rows:
            lines.append(_Line(first, first_styled, rows[0]))
        else:
            lines.append(_Line(first, first_styled))
        for index, row in enumerate(rows):
            if index:
                lines.append(_Line(rest, rest_styled, row))
            for text, styles in row_details(row):
                lines.append(_Line(rest, rest_styled, text=text, text_styles=styles, indent="  "))
        for text, styles in node_details(tree, node):
            lines.append(_Line(rest, rest_styled, text=text, text_styles=styles))
        children = node.children
        for index in reversed(range(len(children))):
            stack.append((children[index], below, index == len(children) - 1, False))


def _name(node: Node, top: bool) -> str:
    if node.tenant is None:
        return node.namespace
    if top and node.namespace != "tenant-root":
        return f"{node.tenant} ({node.namespace})"
    return node.tenant if node.namespace != "tenant-root" else f"{node.tenant} (tenant-root)"


def _marks(node: Node) -> str:
    if node.gpu_only:
        return " [GPU-only pool]"
    if node.budget_root:
        return " [pool]"
    return ""


def _listed(items: list[str]) -> str:
    shown = ", ".join(items[:MAX_LISTED])
    return shown + (f" and {len(items) - MAX_LISTED} more" if len(items) > MAX_LISTED else "")


def row_details(row: KeyRow) -> list[tuple[str, tuple[str, ...]]]:
    details: list[tuple[str, tuple[str, ...]]] = []
    if row.carve_outs:
        carves = [f"{c.tenant} {row.amount(c.charge)}"
                  + (f" (declares {row.amount(c.declared)})" if c.charge != c.declared else "")
                  for c in row.carve_outs]
        details.append((f"carved out by {_listed(carves)}", ("dim",)))
    if row.type == GPU and row.reservations:
        held = [f"{r.kind} {r.namespace}/{r.name} {r.devices}" for r in row.reservations]
        details.append((f"reserved by {_listed(held)}", ("dim",)))
    if row.type != GPU and row.usage:
        used = [f"{u.namespace} {row.amount(u.used)}" for u in row.usage]
        details.append((f"used by pods in {_listed(used)} ({row.quota_key})", ("dim",)))
    if row.unusable and not row.over_committed:  # (over: the cause says it)
        details.append((f"counted as 0 until fixed: {row.unusable}", ("red",)))
    for cause in row.causes:
        details.append((f"over budget: {cause}", ("red",)))
    return details


def node_details(tree: Tree, node: Node) -> list[tuple[str, tuple[str, ...]]]:
    details: list[tuple[str, tuple[str, ...]]] = []
    nodes = tree.nodes
    for charge in node.charges:
        amount = charge.charge if charge.type == GPU else _fmt(charge)
        text = f"charged {amount} towards {charge.root}'s {charge.key}"
        if charge.charge != charge.declared:
            declared = charge.declared if charge.type == GPU else _fmt(charge, declared=True)
            text += f" (declares {declared}; its pool holds more)"
        details.append((text, ()))
    if node.gpu_only and node.ordinary_pool is not None:
        details.append((f"GPU-only: its pods count in {node.ordinary_pool}'s pool for ordinary keys", ("dim",)))
    if not node.budget_root and node.namespace != "tenant-root":
        if node.budget_pool is not None:
            details.append((f"declares nothing: in {node.budget_pool}'s pool", ("dim",)))
        if node.workloads:
            held = [f"{w.kind} {w.name} " + "+".join(f"{n} {c}" for c, n in w.classes) for w in node.workloads]
            details.append((f"reserves: {_listed(held)}", ("dim",)))
    if node.tenant is None and node.namespace != "tenant-root":
        details.append(("no Tenant object in the state", ("dim",)))
    details.append(_vgpu(node, nodes))
    for finding in node.findings:
        if finding.kind == "over-committed":
            continue  # shown on its row
        style = ("red",) if finding.severity == ERROR else ("yellow",)
        details.append((f"{finding.severity}: {finding.kind}: {finding.message}", style))
    return details


def _vgpu(node: Node, nodes: dict[str, Node]) -> tuple[str, tuple[str, ...]]:
    vgpu = node.vgpu
    label = "" if vgpu.label is None else f" (Namespace label says {'true' if vgpu.label else 'false'})"
    if node.namespace == "tenant-root":
        return (f"vGPU: {'entitled' if vgpu.entitled else 'not entitled'} (the platform's switch){label}",
                ("dim",) if vgpu.entitled else ("yellow",))
    if vgpu.entitled:
        return (f"vGPU: entitled{label}", ("green",))
    if vgpu.broken_by == PLATFORM:
        why = "the platform's vGPU is off"
    elif vgpu.broken_by == node.namespace:
        why = "it does not ask (spec.gpu.vgpu)" if node.tenant is not None else "no Tenant object asks for it"
    else:
        broken = nodes.get(vgpu.broken_by or "")
        if broken is not None and broken.tenant is None:
            why = f"{vgpu.broken_by} has no Tenant object to ask for it"
        else:
            who = f"{broken.tenant} ({vgpu.broken_by})" if broken is not None else vgpu.broken_by
            why = f"{who} does not ask (spec.gpu.vgpu)"
    return (f"vGPU: not entitled: {why}{label}", ("dim",))


def _fmt(charge, declared: bool = False) -> str:
    from fractions import Fraction

    from cozyrender.budgets.usage import format_amount

    return format_amount(charge.quota_key, Fraction(charge.declared if declared else charge.charge))


__all__ = ["node_details", "render_text", "row_details"]
