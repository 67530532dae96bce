"""Where the suite's time goes, from the JUnit report `make test` writes (build/test-report.xml).

Rule: a test's time is the report's (setup + call + teardown), so a module's first test carries
the start of its module-scoped plane, and the first user of a session plane (`apiserver`,
`cluster`) carries that plane's start. The table sums them per module, largest first, with the
live planes each start recorded (the `plane-start` property tests/conftest.py writes: folder,
kind, webhook replicas, seconds) and the slowest tests. A name's `@group` suffix (xdist's
loadgroup) is dropped. Under pytest-xdist the sum of the tests'
times is more than the run's wall time (the workers overlap); both are printed.

    python tools/test_times.py build/test-report.xml [--top 25] [--modules 40]

Bad input: one line `test_times: error: ...` on stderr, exit 2.
"""

from __future__ import annotations

import argparse
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path


def module_of(classname: str) -> str:
    """`tests.test_x` or `tests.test_x.TestClass` -> `test_x.py`."""
    parts = classname.split(".")
    return next((part + ".py" for part in parts if part.startswith("test_")), classname)


def read_report(path: Path) -> tuple[list[dict], float]:
    """The report's test cases (module, name, seconds, outcome, planes) and the run's wall time."""
    root = ET.parse(path).getroot()
    suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
    cases, wall = [], 0.0
    for suite in suites:
        wall += float(suite.get("time") or 0)
        for case in suite.iter("testcase"):
            outcome = next((child.tag for child in case if child.tag in ("failure", "error", "skipped")), "passed")
            planes = [prop.get("value", "") for prop in case.iter("property") if prop.get("name") == "plane-start"]
            cases.append({"module": module_of(case.get("classname") or "?"), "name": (case.get("name") or "?").split("@")[0],
                          "seconds": float(case.get("time") or 0), "outcome": outcome, "planes": planes})
    return cases, wall


def module_table(cases: list[dict]) -> list[tuple[str, int, float, int]]:
    """(module, tests, seconds, planes started), largest time first."""
    tests, seconds, planes = defaultdict(int), defaultdict(float), defaultdict(int)
    for case in cases:
        tests[case["module"]] += 1
        seconds[case["module"]] += case["seconds"]
        planes[case["module"]] += len(case["planes"])
    return sorted(((m, tests[m], seconds[m], planes[m]) for m in tests), key=lambda row: (-row[2], row[0]))


def render(cases: list[dict], wall: float, top: int, modules: int) -> str:
    total = sum(case["seconds"] for case in cases) or 1.0
    outcomes = defaultdict(int)
    for case in cases:
        outcomes[case["outcome"]] += 1
    lines = [f"{len(cases)} tests ({', '.join(f'{n} {o}' for o, n in sorted(outcomes.items()))}); "
             f"tests' time {total:.0f} s, run's wall time {wall:.0f} s", "",
             "| module | tests | seconds | share | planes started |", "| --- | ---: | ---: | ---: | ---: |"]
    rows = module_table(cases)
    for module, count, seconds, planes in rows[:modules]:
        lines.append(f"| {module} | {count} | {seconds:.1f} | {100 * seconds / total:.1f} % | {planes or ''} |")
    rest = rows[modules:]
    if rest:
        lines.append(f"| {len(rest)} other modules | {sum(r[1] for r in rest)} | {sum(r[2] for r in rest):.1f} | "
                     f"{100 * sum(r[2] for r in rest) / total:.1f} % | {sum(r[3] for r in rest) or ''} |")
    started = [(case["module"], plane) for case in cases for plane in case["planes"]]
    if started:
        lines += ["", "| plane started (folder, kind, webhook replicas) | by | seconds |", "| --- | --- | ---: |"]
        for module, plane in sorted(started, key=lambda p: -float(p[1].rsplit(" ", 1)[-1])):
            what, seconds = plane.rsplit(" ", 1)
            lines.append(f"| {what} | {module} | {float(seconds):.1f} |")
    lines += ["", f"| slowest {top} tests (setup + call + teardown) | seconds |", "| --- | ---: |"]
    for case in sorted(cases, key=lambda c: -c["seconds"])[:top]:
        lines.append(f"| {case['module']}::{case['name']} | {case['seconds']:.1f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="test_times", description=__doc__.split("\n\n")[0])
    parser.add_argument("report", type=Path)
    parser.add_argument("--top", type=int, default=25, help="how many of the slowest tests to list")
    parser.add_argument("--modules", type=int, default=40, help="how many modules to list before the rest")
    args = parser.parse_args(argv)
    try:
        cases, wall = read_report(args.report)
    except (OSError, ET.ParseError) as err:
        print(f"test_times: error: {args.report}: {err}", file=sys.stderr)
        return 2
    if not cases:
        print(f"test_times: error: {args.report} holds no test case", file=sys.stderr)
        return 2
    print(render(cases, wall, args.top, args.modules))
    return 0


if __name__ == "__main__":
    sys.exit(main())
