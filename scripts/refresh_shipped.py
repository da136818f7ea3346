"""Recompute the derived figures of the shipped A/B runs (``sample_traces/ab_*/ab.json`` and
``ab.html``) with today's code; the recorded measurements (each run's step series, digests,
statuses) stay as they were. Run from the repository root:

    .venv/bin/python scripts/refresh_shipped.py

``tests/integration/test_shipped_numbers.py`` fails when a shipped file drifts from what this
writes. The numbers quoted in ``sample_traces/README.md`` are refreshed by
``PROFPLUG_README_UPDATE=1 .venv/bin/python -m pytest tests/integration/test_readme_numbers.py``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from profplug.analyzers.ab.reanalyze import reanalyze
from profplug.analyzers.commands.ab_report import ab_json_text
from profplug.analyzers.render.registry import render_text

ROOT = Path(__file__).resolve().parents[1]


def refresh(out: Path) -> list[str]:
    """Rewrite ``out/ab.json`` (and ``out/ab.html`` when shipped); the files changed."""
    doc = json.loads((out / "ab.json").read_text())
    res = reanalyze(doc, out)
    changed = []
    for name, text in (("ab.json", ab_json_text(res)), ("ab.html", render_text(res, "html"))):
        path = out / name
        if name == "ab.html" and not path.exists():
            continue
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
            changed.append(str(path.relative_to(ROOT)))
    return changed


def main() -> int:
    if Path.cwd() != ROOT:
        print(f"run from {ROOT} (the stored what-if runs are named from there)", file=sys.stderr)
        return 2
    for ab in sorted((ROOT / "sample_traces").glob("ab_*/ab.json")):
        for path in refresh(ab.parent):
            print(f"rewrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
