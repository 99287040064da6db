#!/usr/bin/python3
"""Reads a kiln-logs --json report; prints each run's events as
`NAME: KIND FIRST-LAST (detail), ...` and "ok" when the document is
well-formed (the format, a summary and a message per event)."""
import json
import sys

with open(sys.argv[1]) as f:
    doc = json.load(f)
assert doc["format"] == "kiln-logs" and doc["version"] == 1, doc.get("format")
for run in doc["runs"]:
    assert run["summary"]["steps"] > 0, run["name"]
    parts = []
    for e in run["events"]:
        assert e["message"] and isinstance(e["step"], int), e
        detail = ""
        if "gap_s" in e:
            detail = " (gap %.1f s)" % e["gap_s"]
        elif e.get("ratio") is not None:
            detail = " (%.1fx)" % e["ratio"]
        elif "count" in e and e["kind"] == "skipped":
            detail = " (%d)" % e["count"]
        parts.append("%s %d-%d%s" % (e["kind"], e["step"], e["last_step"], detail))
    print("%s: %s" % (run["name"], ", ".join(parts) if parts else "no events"))
print("ok")
