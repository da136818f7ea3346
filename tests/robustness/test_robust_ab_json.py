"""``ab.json`` is untrusted input. A tampered file (a field of the wrong type or out of range,
a stored what-if, subnormal or no step times) gives one line naming the bad field and a
non-zero exit (never a traceback); a FIFO, a link to /dev/zero, a file over the cap or a
symlinked ab.json is refused before anything is read or written, and a page is never
written over it or over the what-if's run; values reach the page escaped and the terminal
without escape sequences; fields it does not know are kept, and a huge one is rewritten
compact and exact. Every input is rebuilt here from a synthetic A/B."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from profplug.analyzers.ab.schema import MAX_AB_JSON_BYTES
from profplug.analyzers.render.registry import render_text
from synth import ab_result, ab_runs, one_error, sync_loop

from profplug.cli.main import main


def _doc(rounds: int = 3) -> dict[str, Any]:
    return json.loads(render_text(ab_result(ab_runs(rounds=rounds), rounds=rounds), "json"))


def _ab(tmp_path: Path, doc: dict[str, Any] | str) -> Path:
    out = tmp_path / "ab"
    out.mkdir()
    text = doc if isinstance(doc, str) else json.dumps(doc)
    (out / "ab.json").write_text(text.replace('"__1e400__"', "1e400"))  # decodes to inf
    return out


def _tamper(doc: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """Set ``a.b[0].c`` (a key missing from a dict is added; ``DEL`` removes it)."""
    cur: Any = doc
    parts = path.replace("[", ".").replace("]", "").split(".")
    for p in parts[:-1]:
        cur = cur[int(p)] if isinstance(cur, list) else cur[p]
    last: Any = int(parts[-1]) if isinstance(cur, list) else parts[-1]
    if value == "DEL":
        del cur[last]
    elif isinstance(cur, list):
        cur[last] = value
    else:
        cur[last] = value
    return doc


# (field, value, what the one line says)
TAMPERED = [
    ("runs[0].index", "x", "runs[0].index: expected `int`, got `str`"),
    ("runs[0].round", -1, "runs[0].round: expected `int` >= 0"),
    ("runs[1].policy", None, "runs[1].policy: expected `str`, got `null`"),
    ("runs[1].policy", "ghost", "runs[1].policy: 'ghost' is not among the policies"),
    ("runs[0].ranks[0].step_us[0]", -800.0, "runs[0].ranks[0].step_us[0]: expected `float` >= 0.001"),
    ("runs[0].ranks[0].step_us[2]", 1e308, "runs[0].ranks[0].step_us[2]: expected `float` <="),
    ("runs[0].ranks[0].step_us", "fast", "runs[0].ranks[0].step_us: expected `array | null`"),
    ("runs[0].ranks[0].rank", "0", "runs[0].ranks[0].rank: expected `int`, got `str`"),
    ("runs[0].ranks", {"0": 1}, "runs[0].ranks: expected `array`, got `object`"),
    ("runs[0].ranks[0]", "DEL", None),  # a list item removed: still valid
    ("runs[0].ranks[0].rank", "DEL", "runs[0].ranks[0]: object missing required field `rank`"),
    ("runs", {}, "runs: expected `array`, got `object`"),
    ("policies", [], "policies: expected `array` of length >= 1"),
    ("policies", ["event"], "policies: device (the baseline) is not among ['event']"),
    ("policies", ["device", "event", "event"], "policies: a policy appears twice"),
    ("policies", "device", "policies: expected `array`, got `str`"),
    ("rounds", -3, "rounds: expected `int` >= 1"),
    ("rounds", 10**7, "rounds: expected `int` <= 100000"),
    ("rounds", 50, "rounds: 50, but the runs fill only 3 (and the A/B was not interrupted)"),
    ("rounds", 2, "rounds: 2, but runs[].round goes up to 2"),
    ("skip", 1.5, "skip: expected `int | null`, got `float`"),
    ("command", "rm -rf /", "command: expected `array | null`, got `str`"),
    ("whatif", [1], "whatif: expected `object | null`, got `array`"),
    ("whatif", {"predicted_step_us": "__1e400__"}, "number out of range"),
    ("runs[0].extra", json.loads("[" * 900 + "]" * 900), "nested deeper than 64 levels"),
    ("version", "1", "version: expected `int`, got `str`"),
    ("runs[0].reasons", [3], "runs[0].reasons[0]: expected `str`, got `int`"),
    ("runs[0].exit_status", 2**70, "runs[0].exit_status: expected `int`"),
]


@pytest.mark.parametrize(("field", "value", "says"), TAMPERED, ids=[f"{f}={str(v)[:12]}"
                                                                    for f, v, _ in TAMPERED])
def test_a_tampered_ab_json_gives_one_line_naming_the_field(tmp_path, capsys, field, value,
                                                            says) -> None:
    doc = _tamper(_doc(), field, value)
    out = _ab(tmp_path, doc)
    before = (out / "ab.json").read_bytes()
    code = main(["ab-report", str(out)])
    err = capsys.readouterr().err
    assert "Traceback" not in err
    if says is None:  # valid: analyzed (rank 0's digests gone: outputs differ, exit 1)
        assert code in (0, 1) and "error" not in err
        return
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("profplug: error: ")
    assert says in lines[0], lines[0]
    assert (out / "ab.json").read_bytes() == before  # nothing rewritten


def test_non_json_constants_and_garbage_are_one_line(tmp_path, capsys) -> None:
    for text in ('{"version": 1, "policies": ["device"], "runs": [], "x": NaN}',
                 "\xff\xfe", "[" * 100_000 + "]" * 100_000, "[]", "null"):
        out = tmp_path / "ab"
        if out.exists():
            (out / "ab.json").unlink()
            out.rmdir()
        _ab(tmp_path, text)
        assert main(["ab-report", str(out)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("profplug: error: "), err


def test_a_fifo_or_dev_zero_is_refused_unread(tmp_path, capsys) -> None:
    out = tmp_path / "ab"
    out.mkdir()
    os.mkfifo(out / "ab.json")  # open() would block for ever
    assert main(["ab-report", str(out)]) == 2
    assert "ab.json: not a regular file" in capsys.readouterr().err
    (out / "ab.json").unlink()
    (out / "ab.json").symlink_to("/dev/zero")
    assert main(["ab-report", str(out)]) == 2  # read through the link: not a regular file
    assert "ab.json: not a regular file" in capsys.readouterr().err
    assert main(["ab-report", str(out), "--rewrite"]) == 2  # never written through a link
    assert "a symbolic link" in capsys.readouterr().err


def test_an_ab_json_over_the_cap_is_refused(tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.setattr("profplug.analyzers.ab.schema.MAX_AB_JSON_BYTES", 1000)
    import profplug.analyzers.ab.schema as schema
    monkeypatch.setattr(schema.read_regular, "__defaults__", (1000,))
    out = _ab(tmp_path, _doc())
    assert main(["ab-report", str(out)]) == 2
    assert "over the 0 MiB an ab.json may have" in capsys.readouterr().err
    assert MAX_AB_JSON_BYTES == 256 << 20


def test_a_symlinked_ab_json_is_not_rewritten_through(tmp_path, capsys) -> None:
    target = tmp_path / "elsewhere.json"
    target.write_text(json.dumps(_doc()))
    before = target.read_bytes()
    out = tmp_path / "ab"
    out.mkdir()
    (out / "ab.json").symlink_to(target)
    assert main(["ab-report", str(out)]) == 0  # read through the link, written nowhere
    assert main(["ab-report", str(out), "--rewrite"]) == 2
    assert "a symbolic link" in capsys.readouterr().err
    assert target.read_bytes() == before


def test_html_over_ab_json_is_refused(tmp_path, capsys) -> None:
    out = _ab(tmp_path, _doc())
    before = (out / "ab.json").read_bytes()
    assert main(["ab-report", str(out), "--html", str(out / "ab.json")]) == 2
    assert "is an input" in capsys.readouterr().err
    assert (out / "ab.json").read_bytes() == before


def test_strings_from_ab_json_are_escaped_in_the_page_and_on_the_terminal(
        tmp_path, capsys) -> None:
    doc = _doc()
    hostile = '<script>alert(1)</script>\x1b]8;;http://x\x07\x1b[31m'
    doc["policies"] = ["device", hostile, "none"]
    for r in doc["runs"]:
        if r["policy"] == "event":
            r["policy"] = hostile
            r["status"] = "failed"
            r["reasons"] = [hostile]
    out = _ab(tmp_path, doc)
    page = tmp_path / "p.html"
    code = main(["ab-report", str(out), "--html", str(page)])
    cap = capsys.readouterr()
    assert code == 6, cap.err  # the hostile policy has no successful run
    html = page.read_text()
    assert "<script" not in html and "&lt;script&gt;" in html
    assert "\x1b" not in cap.out and "\x1b" not in cap.err
    assert "\\x1b]8;;" in cap.out


def test_outputs_differ_line_has_no_escape_sequences(tmp_path, capsys) -> None:
    doc = _doc()
    esc = "device\x1b[2J"
    doc["policies"] = [esc if p == "device" else p for p in doc["policies"]]
    out = _ab(tmp_path, doc)
    assert main(["ab-report", str(out)]) == 2  # no baseline any more: one line
    err = capsys.readouterr().err
    assert "\x1b" not in err and "\\x1b[2J" in err


def test_a_hard_linked_ab_json_leaves_the_other_link_alone(tmp_path, capsys) -> None:
    other = tmp_path / "elsewhere.json"
    other.write_text(json.dumps(_doc()))
    before = other.read_bytes()
    out = tmp_path / "ab"
    out.mkdir()
    os.link(other, out / "ab.json")
    assert main(["ab-report", str(out), "--rewrite"]) == 0
    assert other.read_bytes() == before  # rewritten by a rename, not through the link
    assert not (out / "ab.json").samefile(other)
    assert sorted(p.name for p in out.iterdir()) == ["ab.json"]  # no temporary file left


def test_ab_report_keeps_unknown_top_level_fields(tmp_path: Path, capsys) -> None:
    doc = _doc()
    doc["note"] = "rerun on node 7"
    doc["future_field"] = {"x": [1, 2]}
    out = _ab(tmp_path, doc)
    assert main(["ab-report", str(out)]) == 0
    again = json.loads((out / "ab.json").read_text())
    assert again["note"] == "rerun on node 7" and again["future_field"] == {"x": [1, 2]}
    assert again["verdict"] == doc["verdict"]  # a known field is the analysis', not kept


@pytest.mark.parametrize("whatif, where", [
    ({}, "whatif: object missing required field `run`"),
    ({"run": "r", "predicted_step_us": "fast", "recorded_step_us": 1.0},
     "whatif.predicted_step_us: expected `float`, got `str`"),
    ({"run": "r", "predicted_step_us": 10.0}, "object missing required field"),
])
def test_tampered_stored_whatif_is_one_line(tmp_path: Path, capsys, whatif: dict,
                                            where: str) -> None:
    doc = _doc()
    doc["whatif"] = whatif
    out = _ab(tmp_path, doc)
    before = (out / "ab.json").read_bytes()
    assert main(["ab-report", str(out)]) == 2
    assert where in one_error(capsys)
    assert (out / "ab.json").read_bytes() == before


@pytest.mark.parametrize("steps", [[5e-324] * 5, [3.6e9, 5e-324, 5e-324], [1e-308, 1.0]])
def test_subnormal_ab_step_times_are_one_line(tmp_path: Path, capsys, steps: list) -> None:
    doc = _doc()
    doc["runs"][0]["ranks"][0]["step_us"] = steps
    out = _ab(tmp_path, doc)
    assert main(["ab-report", str(out)]) == 2
    assert "runs[0].ranks[0].step_us" in one_error(capsys)


def test_zero_step_ab_json_says_no_run_recorded_a_step(tmp_path: Path, capsys) -> None:
    doc = _doc()
    for r in doc["runs"]:
        for k in r["ranks"]:
            k["step_us"] = []
            k["host_step_us"] = []
    out = _ab(tmp_path, doc)
    assert main(["ab-report", str(out)]) == 6
    err = capsys.readouterr().err
    assert "no run recorded a step" in err and "0 of" not in err


def test_ab_html_over_the_whatif_run_refused(tmp_path: Path, capsys) -> None:
    out = _ab(tmp_path, _doc())
    (tmp_path / "traced").mkdir()
    trace = sync_loop(tmp_path / "traced" / "rank0.json")
    before = trace.read_bytes()
    assert main(["ab-report", str(out), "--whatif", str(tmp_path / "traced"), "--html",
                 str(trace)]) == 2
    assert "rank0.json" in one_error(capsys)
    assert main(["ab-report", str(out), "--html", "-"]) == 2
    assert "two documents to stdout" in one_error(capsys)
    assert trace.read_bytes() == before


def test_huge_ab_json_step_series_rewritten_compact_and_exact(tmp_path: Path) -> None:
    doc = _doc()
    n = 0
    for r in doc["runs"]:
        for k in r["ranks"]:
            k["step_us"] = [round(100.0 + (i % 97) * 0.013, 3) for i in range(20_000)]
            n += 20_000
    out = _ab(tmp_path, doc)
    assert main(["ab-report", str(out)]) == 0
    text = (out / "ab.json").read_text()
    assert text.count("\n") < 5_000 < n  # a series on one line, not a line per step
    again = json.loads(text)
    assert [k["step_us"] for r in again["runs"] for k in r["ranks"]] == \
        [k["step_us"] for r in doc["runs"] for k in r["ranks"]]


def test_ab_json_writer_still_refuses_nan() -> None:
    from profplug.analyzers.commands.ab_report import ab_json_text
    from synth import ab_result, ab_runs

    res = ab_result(ab_runs(rounds=3), rounds=3)
    res.runs[0]["ranks"][0]["step_us"] = [1.0] * 20 + [float("nan")]
    with pytest.raises(ValueError, match="not JSON compliant"):
        ab_json_text(res)
