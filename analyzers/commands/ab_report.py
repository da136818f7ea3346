"""What ``profplug ab`` does once its runs are done: analyze, overlay a what-if, write
``DIR/ab.json`` (and ``--html``), print the table and the loud lines, return the exit code;
and ``profplug ab-report DIR``: the same from an existing ``DIR/ab.json``, running nothing.
"""

from __future__ import annotations

import json
import os
import sys
from array import array
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
from profplug.analyzers.ab.analyze import analyze_ab
from profplug.analyzers.ab.overlay import attach, calibrated, restored
from profplug.analyzers.ab.result import EXIT_NO_RESULT, EXIT_NOT_REACHED, SCHEMA_VERSION, AbResult
from profplug.analyzers.ab.schema import read_regular, validate
from profplug.analyzers.commands.outpaths import STDOUT, check_outputs
from profplug.analyzers.commands.output import write_page, write_text
from profplug.analyzers.core.atomicfile import write_output
from profplug.analyzers.core.errors import ProfplugError, one_line
from profplug.analyzers.core.vocabulary import Format
from profplug.analyzers.render.registry import render_text
from profplug.analyzers.scale.pathargs import run_paths


def finish_ab(out: Path, runs: Sequence[dict[str, Any]], *, policies: Sequence[str],
              rounds: int, order: str, seed: int | None, skip: int | None, steps: int | None,
              command: Sequence[str], interrupted: int | None = None,
              html: Path | None = None, whatif: str | None = None,
              stored_whatif: dict[str, Any] | None = None,
              stopped: str | None = None,
              unknown: dict[str, Any] | None = None, write: bool = True,
              fmt: Format = Format.TABLE) -> tuple[AbResult, int]:
    """The result of the runs and the exit code (docs/ab.md). ``stored_whatif``: a what-if
    overlay read back from ``ab.json`` (whose folder is ``out``), set against the
    measurement again (``whatif``, a traced run, makes a new one instead). ``write``:
    (re)write ``out/ab.json``; ``fmt``: what goes to stdout, the table or the JSON."""
    res = analyze_ab(runs, policies=policies, rounds=rounds, order=order, seed=seed,
                     skip=skip, steps=steps, command=command, interrupted=interrupted,
                     stopped=stopped)
    res.unknown = dict(unknown or {})
    if whatif is None and stored_whatif is not None:  # today's, when its run is at hand
        attach(res, restored(res, stored_whatif, out))
    if whatif is not None:
        try:
            attach(res, calibrated(res, whatif, out))
        except ProfplugError as exc:
            res.warnings.append(f"--whatif {whatif}: {exc}")
    if write:
        replace_file(out / "ab.json", ab_json_text(res))
    write_text(ab_json_text(res) if fmt == Format.JSON else render_text(res, Format.TABLE), None)
    if html is not None:  # ab.json is kept: it is written first
        check_outputs([Path(STDOUT), html], ab_inputs(out, whatif))
        write_page(res, html)
    for m in res.outputs.mismatches:
        print(f"profplug ab: OUTPUTS DIFFER: {one_line(m.line())}", file=sys.stderr)
    for line in res.not_reached[:1]:  # one loud line (all of them are in ab.json)
        more = len(res.not_reached) - 1
        print(f"profplug ab: {one_line(line)}" + (f" (and {more} more)" if more else "")
              + f" (exit status {EXIT_NOT_REACHED})", file=sys.stderr)
    code = res.exit_code()
    if code and res.outputs.identical is not False and code != EXIT_NOT_REACHED:
        print(f"profplug ab: {one_line(_failure_line(res, code))} (exit status {code})",
              file=sys.stderr)
    return res, code


def _failure_line(res: AbResult, code: int) -> str:
    """What went wrong, as it is: runs that failed, and the policies left without a step."""
    failed = len(res.failed_runs)
    head = f"{failed} of {len(res.runs)} runs failed" if failed else ""
    if code != EXIT_NO_RESULT:
        return head or f"exit status {code}"
    if not any(k.get("step_us") is not None and len(k["step_us"])
               for r in res.runs for k in r.get("ranks") or []):
        why = "no run recorded a step"
    else:
        none = [s.policy for s in res.summary if s.median_step_us is None]
        why = (f"no successful run of {', '.join(none)} recorded a step: nothing to compare "
               "it with")
    return f"{head}; {why}" if head else why


STEP_SERIES = ("step_us", "host_step_us")  # per rank: one number per step, the bulk


def ab_json_text(res: AbResult) -> str:
    """``ab.json``: the JSON renderer's document (indented, no NaN), each rank's step series
    on one line, encoded by msgspec (``json`` at one line each is far slower on long series;
    a series that is not all finite numbers goes through ``json``, which refuses it)."""
    doc = res.to_dict()
    token = f"@steps-{os.urandom(8).hex()}-"  # not in any string of the document
    series: list[bytes] = []

    def compact(k: dict[str, Any]) -> dict[str, Any]:
        k = dict(k)
        for key in STEP_SERIES:
            v = k.get(key)
            if isinstance(v, array):  # a series ab-report read back (_packed)
                v = v.tolist() if len(v) <= 8 else v
                k[key] = v
            if not (isinstance(v, (list, array)) and len(v) > 8):
                continue
            try:  # msgspec writes NaN as null: only a series of finite numbers goes there
                finite = np.isfinite(np.asarray(v, dtype=np.float64)).all()
            except (TypeError, ValueError):
                continue
            if finite:
                k[key] = f"{token}{len(series)}"
                series.append(msgspec.json.encode(v.tolist() if isinstance(v, array) else v))
        return k

    doc["runs"] = [{**r, "ranks": [compact(k) if isinstance(k, dict) else k
                                   for k in r["ranks"]]}
                   if isinstance(r.get("ranks"), list) else r for r in doc["runs"]]
    text = json.dumps(doc, indent=1, allow_nan=False) + "\n"
    if not series:
        return text
    parts = text.split(f'"{token}')
    out = [parts[0]]
    for p in parts[1:]:
        num, _, rest = p.partition('"')
        out += [series[int(num)].decode(), rest]
    return "".join(out)


def ab_inputs(out: Path, whatif: str | None) -> list[Path]:
    """What ``ab`` / ``ab-report`` read: ``DIR/ab.json`` (and DIR), the ``--whatif`` run's
    traces (``--html`` may be none of them; the table goes to stdout)."""
    runs = [] if whatif is None else [Path(x) for x in
                                      ([whatif] if Path(whatif).exists() else whatif.split(","))
                                      if str(x)]
    return [out / "ab.json", out, *runs]


def replace_file(path: Path, text: str) -> None:
    """Write ``path`` whole through a temporary file beside it (``core.atomicfile``): a
    hard link elsewhere keeps its bytes, never half written."""
    write_output(path, text)


def _load(out: Path, rewrite: bool) -> dict[str, Any]:
    path = out / "ab.json"
    if not out.is_dir():
        raise ProfplugError(f"{out}: no such directory (the -o DIR of a profplug ab)")
    if rewrite and path.is_symlink():  # ab-report rewrites it: never through a link, outside DIR
        raise ProfplugError(f"{path}: a symbolic link; ab-report rewrites ab.json and does "
                            "not write through a link (copy the file into the directory)")
    try:
        data = read_regular(path)
    except FileNotFoundError:
        raise ProfplugError(f"{path}: not found (is {out} the -o DIR of a profplug ab?)"
                            ) from None
    doc = validate(path, data)
    del data
    if doc.get("version") != SCHEMA_VERSION:
        raise ProfplugError(f"{path}: ab.json version {doc.get('version')!r} (this profplug "
                            f"reads version {SCHEMA_VERSION})")
    _packed(doc)
    return doc


def _packed(doc: dict[str, Any]) -> None:
    """Each rank's step series as ``array('d')`` (8 bytes a step, not a list of Python
    floats: 32), in place; the schema has checked them (finite numbers in range)."""
    for r in doc.get("runs") or []:
        for k in r.get("ranks") or []:
            for key in STEP_SERIES:
                if isinstance(k.get(key), list):
                    k[key] = array("d", k[key])


def report_ab(out: Path, *, html: Path | None = None, whatif: str | None = None,
              fmt: str = Format.TABLE, rewrite: bool = False) -> int:
    """``profplug ab-report DIR``: analyze the runs recorded in ``DIR/ab.json`` again (the
    current statistics, verdicts and output check), print the table (``fmt`` "json": the
    ab.json this analysis makes), write ``--html``; nothing runs. ``DIR/ab.json`` is read
    only, rewritten only with ``rewrite`` (``--rewrite``). Returns the exit status ``ab``
    would have (docs/ab.md)."""
    if fmt not in (Format.TABLE, Format.JSON):
        raise ProfplugError(f"--format {fmt!r}: ab-report writes table or json")
    check_outputs([Path(STDOUT), html], ab_inputs(out, whatif))
    doc = _load(out, rewrite)
    if whatif is not None:
        run_paths(whatif)  # a missing path is a usage error
    interrupted = doc.get("interrupted_status")
    if doc.get("interrupted") and not interrupted:  # ab.json before interrupted_status
        interrupted = doc.get("exit_status") if doc.get("exit_status") in (130, 143) else 130
    _, code = finish_ab(
        out, [{k: v for k, v in r.items() if k not in ("median_step_us",
                                                         "host_median_step_us")}
              for r in doc["runs"]],
        policies=list(doc["policies"]),
        rounds=int(doc.get("rounds") or 1 + max((int(r["round"]) for r in doc["runs"]),
                                                default=0)),
        order=doc.get("order") or "interleaved", seed=doc.get("seed"), skip=doc.get("skip"),
        steps=doc.get("steps"), command=list(doc.get("command") or []),
        interrupted=interrupted or None, html=html, whatif=whatif,
        stored_whatif=doc.get("whatif"), stopped=doc.get("stopped"), unknown=doc,
        write=rewrite, fmt=Format(fmt))
    kept = "rewritten" if rewrite else "left as it was (--rewrite stores this analysis)"
    print(f"profplug ab-report: {one_line(out / 'ab.json')} analyzed again from its "
          f"{len(doc['runs'])} runs (nothing was run); {kept}", file=sys.stderr)
    return code
