"""What ``profplug ab`` does once its runs are done: analyze, overlay a what-if, write
``DIR/ab.json`` (and ``--html``), print the table and the loud lines, return the exit code.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ...errors import ProfplugError
from ..commands import run_paths, write_page, write_text
from ..render.registry import render_text
from .analyze import analyze_ab
from .overlay import attach, whatif_overlay
from .result import AbResult


def finish_ab(out: Path, runs: Sequence[dict[str, Any]], *, policies: Sequence[str],
              rounds: int, order: str, seed: int | None, skip: int, steps: int,
              command: Sequence[str], interrupted: int | None = None,
              html: Path | None = None, whatif: str | None = None) -> tuple[AbResult, int]:
    """The result of the runs and the exit code (docs/ab.md)."""
    res = analyze_ab(runs, policies=policies, rounds=rounds, order=order, seed=seed,
                     skip=skip, steps=steps, command=command, interrupted=interrupted)
    if whatif is not None:
        try:
            device = res.policy("device").median_step_us
            attach(res, whatif_overlay(run_paths(whatif), whatif, device))
        except ProfplugError as exc:
            res.warnings.append(f"--whatif {whatif}: {exc}")
    write_text(render_text(res, "json"), out / "ab.json")
    write_text(render_text(res, "table"), None)
    if html is not None:
        write_page(res, html)
    for m in res.outputs.mismatches:
        print(f"profplug ab: OUTPUTS DIFFER: {m.line()}", file=sys.stderr)
    code = res.exit_code()
    if code and res.outputs.identical is not False:
        failed = len(res.failed_runs)
        print(f"profplug ab: {failed} of {len(res.runs)} runs failed"
              + ("; a policy has no successful run" if code == 6 else "")
              + f" (exit status {code})", file=sys.stderr)
    return res, code
