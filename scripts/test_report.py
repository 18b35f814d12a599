#!/usr/bin/env python3
"""Summarises a CTest JUnit report: how many tests ran, passed, failed and were skipped, and
why each skipped test skipped. Exits 1 when a test failed or skipped for a reason that is not
expected on this machine (CTest itself counts a skip as a pass).

  test_report.py REPORT.xml [--expect-skip REGEX ...]

A skip's reason is the first line a test prints after GoogleTest's "Skipped" marker, or the
text after "SKIPPED:" in a script test's output. --expect-skip (repeatable) names reasons
that are legitimate here, e.g. '^no CUDA device:' on a machine without an NVIDIA GPU.
"""
import argparse
import collections
import re
import sys
import xml.etree.ElementTree as ET


def skip_reason(output):
    lines = output.splitlines()
    for i, line in enumerate(lines):
        if line.rstrip().endswith(": Skipped") and i + 1 < len(lines):
            return lines[i + 1].strip() or "(GoogleTest skip without a message)"
        m = re.match(r"\s*SKIPPED:\s*(.*)", line)
        if m:
            return m.group(1).strip()
    return "(no reason printed)"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("report")
    ap.add_argument("--expect-skip", action="append", default=[], metavar="REGEX")
    a = ap.parse_args()

    cases = ET.parse(a.report).getroot().iter("testcase")
    passed, failed = [], []
    skipped = collections.defaultdict(list)  # reason -> test names
    for case in cases:
        name = case.get("name").split("  #")[0]  # drop GoogleTest's "# GetParam() = ..."
        output = case.findtext("system-out") or ""
        if case.find("skipped") is not None or case.get("status") == "notrun":
            skipped[skip_reason(output)].append(name)
        elif case.find("failure") is not None or case.get("status") == "fail":
            failed.append(name)
        else:
            passed.append(name)

    n_skipped = sum(len(v) for v in skipped.values())
    total = len(passed) + len(failed) + n_skipped
    print(f"tests: {total} in all; {len(passed) + len(failed)} ran: {len(passed)} passed, "
          f"{len(failed)} failed; {n_skipped} skipped")
    unexpected = []
    for reason, names in sorted(skipped.items(), key=lambda kv: -len(kv[1])):
        expected = any(re.search(p, reason) for p in a.expect_skip)
        tag = "expected here" if expected else "NOT EXPECTED HERE"
        print(f"  skipped {len(names)} ({tag}): {reason}")
        for name in names:
            print(f"    {name}")
        if not expected:
            unexpected += names
    for name in failed:
        print(f"  failed: {name}")
    if unexpected:
        print(f"{len(unexpected)} test(s) skipped that should run on this machine")
    return 1 if failed or unexpected else 0


if __name__ == "__main__":
    sys.exit(main())
