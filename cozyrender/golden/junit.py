"""JUnit XML for golden-test reports, in the shape helm-unittest and kubeconform
write it and CI systems read it: one <testsuites> with one <testsuite> per
suite folder, one <testcase> per case (a <failure> with the problems), a
<testcase> with an <error> for a case that could not be loaded, and one for
each stale file (a failure: the run fails on it)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from cozyrender.golden import GoldenReport

SUITE = "cozyrender golden"


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else ""


def junit_xml(report: GoldenReport, cases_dir: Path, name_of) -> bytes:
    """The report as JUnit XML bytes; `name_of(path)` names a case or file relative to the suite."""
    suite_name = str(cases_dir)
    testcases: list[ET.Element] = []
    failures = errors = 0
    total_time = 0.0
    for result in report.results:
        case = ET.Element("testcase", name=name_of(result.case.path), classname=suite_name,
                          time=f"{result.seconds:.3f}")
        total_time += result.seconds
        if not result.ok:
            failures += 1
            body = "\n".join(p.rstrip("\n") for p in result.problems)
            failure = ET.SubElement(case, "failure", message=_first_line(body), type="golden")
            failure.text = body
        if result.warnings:
            ET.SubElement(case, "system-err").text = "\n".join(f"warning: {w}" for w in result.warnings)
        testcases.append(case)
    for message, case_dir in zip(report.errors, report.error_cases, strict=True):
        errors += 1
        case = ET.Element("testcase", name=name_of(case_dir) if case_dir else suite_name,
                          classname=suite_name, time="0.000")
        error = ET.SubElement(case, "error", message=_first_line(message), type="case")
        error.text = message
        testcases.append(case)
    for path in report.stale:
        failures += 1
        case = ET.Element("testcase", name=f"stale file {name_of(path)}", classname=suite_name,
                          time="0.000")
        message = f"{name_of(path)}: no case renders or uses this file"
        ET.SubElement(case, "failure", message=message, type="stale").text = message
        testcases.append(case)
    counts = {"tests": str(len(testcases)), "failures": str(failures), "errors": str(errors),
              "time": f"{total_time:.3f}"}
    root = ET.Element("testsuites", name=SUITE, **counts)
    suite = ET.SubElement(root, "testsuite", name=suite_name, skipped="0", **counts)
    suite.extend(testcases)
    ET.indent(root)
    return ET.tostring(root, encoding="utf-8", xml_declaration=True) + b"\n"
