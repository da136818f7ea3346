"""Run every bad input of tests/robustness/bad_inputs.py through ``profplug report`` and
print the markdown table of docs/robustness.md (input -> exit code -> message)."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "tests" / "robustness")]

from bad_inputs import CASES, run_case  # noqa: E402


def message(case_code: int, stdout: str, stderr: str, says: str) -> str:
    lines = stderr.strip().splitlines()
    if case_code == 0:
        hit = [ln for ln in stdout.splitlines() + lines if says in ln]
        return hit[0].strip() if hit else "(report printed)"
    return lines[-1] if lines else ""


def main() -> None:
    print("| input | exit | message |")
    print("| --- | --- | --- |")
    for case in CASES:
        with tempfile.TemporaryDirectory() as d:
            res = run_case(case, Path(d))
            msg = message(case.code, res.stdout, res.stderr, case.says).replace(d, "<dir>")
        name = case.name + (f" (`{' '.join(case.args)}`)" if case.args else "")
        print(f"| {name} | {res.returncode} | `{msg.replace('|', '/')}` |")


if __name__ == "__main__":
    main()
