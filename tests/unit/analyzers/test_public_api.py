"""The public Python API: every name of ``profplug.analyzers.__all__`` imports (and is the
one its type-checking import names); ``import profplug`` stays light for the ranks; the
front object ``open_run`` gives the figures the CLI prints, from the same report; and
docs/python-api.md runs as written."""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import profplug.analyzers
import pytest
from profplug.analyzers import ProfplugError, open_run

from profplug.cli.main import main

pytestmark = pytest.mark.samples_read_once  # the commands these tests run

ROOT = Path(__file__).resolve().parents[3]
INIT = ROOT / "analyzers" / "__init__.py"
DEVICE = "sample_traces/pp2_infer_kineto/device"
EVENT = "sample_traces/pp2_infer_kineto/event"
REPLAY_S = re.compile(r'"replay_s": [0-9.eE+-]+')  # the replay's wall time: varies by run


def _type_checking_imports() -> dict[str, str]:
    """name -> module of every import under ``if TYPE_CHECKING:`` in analyzers/__init__.py."""
    tree = ast.parse(INIT.read_text())
    block = next(n for n in tree.body if isinstance(n, ast.If)
                 and isinstance(n.test, ast.Name) and n.test.id == "TYPE_CHECKING")
    return {a.asname or a.name: str(node.module) for node in block.body
            if isinstance(node, ast.ImportFrom) for a in node.names}


def test_every_public_name_imports_from_where_the_type_checker_reads_it() -> None:
    # given the names of __all__, the imports editors read, and the lazy table
    declared = _type_checking_imports()
    lazy = {k: f"profplug.analyzers.{v}" for k, v in profplug.analyzers._WHERE.items()}
    # then the three lists are one
    assert sorted(profplug.analyzers.__all__) == sorted(declared) == sorted(lazy)
    assert declared == lazy
    # and each name is the object its module defines
    for name in profplug.analyzers.__all__:
        module = sys.modules.get(declared[name]) or __import__(declared[name], fromlist=["_"])
        assert getattr(profplug.analyzers, name) is getattr(module, name), name
    assert set(profplug.analyzers.__all__) <= set(dir(profplug.analyzers))


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="has no attribute 'nope'"):
        getattr(profplug.analyzers, "nope")  # noqa: B009


def test_the_runtime_imports_no_analyzer_library() -> None:
    # the runtime plugin imports profplug.analyzers.core in every rank: the package's
    # __init__ runs too, and must not load the analyzer's libraries
    code = ("import sys, profplug, profplug.analyzers.core.ranges, profplug.analyzers; "
            "print(sorted(m for m in ('numpy', 'pandas', 'msgspec', "
            "'profplug.analyzers.report') if m in sys.modules))")
    got = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, check=True)
    assert got.stdout.strip() == "[]"


@pytest.fixture(scope="module")
def device_run() -> profplug.analyzers.Run:
    return open_run(ROOT / DEVICE)


def _cli_json(tmp_path: Path, *args: str) -> dict[str, object]:
    out = tmp_path / "out.json"
    assert main([*args, "-f", "json", "-o", str(out)]) == 0
    return json.loads(REPLAY_S.sub('"replay_s": 0', out.read_text()))


def _same(doc: dict[str, object]) -> dict[str, object]:
    result: dict[str, object] = json.loads(REPLAY_S.sub('"replay_s": 0', json.dumps(doc)))
    return result


def test_the_front_objects_report_is_the_clis(device_run: profplug.analyzers.Run,
                                              tmp_path: Path) -> None:
    cli = _cli_json(tmp_path, "report", str(ROOT / DEVICE))
    assert _same(device_run.report().to_dict()) == cli
    assert device_run.headline == cli["headline"]
    # the DataFrame's figures are the JSON's, per rank
    frame = device_run.stalls.set_index("rank")
    for r in cli["ranks"]:
        assert frame.loc[r["rank"], "idle_us"] == pytest.approx(r["idle_us"], abs=5e-4)
        for cause, us in r["idle_by_cause_us"].items():
            assert frame.loc[r["rank"], f"{cause}_us"] == pytest.approx(us, abs=5e-4)


def test_the_front_objects_whatif_and_cross_rank_are_the_clis(
        device_run: profplug.analyzers.Run, tmp_path: Path) -> None:
    cli = _cli_json(tmp_path, "whatif", str(ROOT / DEVICE))
    assert _same(device_run.whatif().to_dict()) == cli["whatif"]
    report = _cli_json(tmp_path, "report", str(ROOT / DEVICE))
    assert _same(device_run.cross_rank().to_dict()) == report["cross_rank"]


def test_the_front_objects_comparison_is_the_clis(device_run: profplug.analyzers.Run,
                                                  tmp_path: Path) -> None:
    cli = _cli_json(tmp_path, "compare", str(ROOT / DEVICE), str(ROOT / EVENT))
    assert _same(device_run.compare(open_run(ROOT / EVENT)).to_dict()) == cli


def test_the_front_objects_outputs_are_the_clis(device_run: profplug.analyzers.Run,
                                                tmp_path: Path) -> None:
    out = tmp_path / "report.csv"
    assert main(["report", str(ROOT / DEVICE), "-f", "csv", "-o", str(out)]) == 0
    assert device_run.render("csv") == out.read_text()
    cli_page = tmp_path / "cli.html"
    assert main(["report", str(ROOT / DEVICE), "-q", "-o", os.devnull, "--html",
                 str(cli_page)]) == 0
    page = device_run.render_html(tmp_path / "page.html")
    replayed = re.compile(r"replayed in [0-9.]+ s")  # the replay's wall time

    def same(text: str) -> str:
        return replayed.sub("replayed in 0 s", text)

    assert same(page.read_text()) == same(cli_page.read_text())
    with pytest.raises(ProfplugError, match="unknown format 'svg'"):
        device_run.render("svg")


def test_a_run_without_a_whatif_says_why_in_one_error(tmp_path: Path) -> None:
    run = open_run(ROOT / DEVICE, whatif=False, cross_rank=False)
    with pytest.raises(ProfplugError, match=r"^no what-if for device: "):
        run.whatif()
    with pytest.raises(ProfplugError, match=r"^no cross-rank analysis for device: "):
        run.cross_rank()


def test_open_run_checks_its_paths_and_options_at_once(tmp_path: Path) -> None:
    with pytest.raises(ProfplugError, match="nope: no such file or directory"):
        open_run(tmp_path / "nope")
    with pytest.raises(ProfplugError, match="unknown --drop 'most'"):
        open_run(ROOT / DEVICE, drop="most")


def _python_blocks(page: Path) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", page.read_text(), re.M | re.S)


def test_the_python_api_page_runs_as_written(monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    # given the page's blocks, run in order in one namespace from the repository's root
    page = ROOT / "docs" / "python-api.md"
    blocks = _python_blocks(page)
    assert len(blocks) >= 5
    monkeypatch.chdir(ROOT)
    monkeypatch.delenv("PROFPLUG_CACHE", raising=False)
    namespace: dict[str, object] = {"__name__": "python_api_page"}
    for i, code in enumerate(blocks):
        exec(compile(code, f"{page} block {i + 1}", "exec"), namespace)  # its asserts hold
    # then what it prints is the run's own headline and verdict
    printed = capsys.readouterr().out
    run = namespace["run"]
    assert isinstance(run, profplug.analyzers.Run)
    assert run.headline in printed
    assert os.path.basename(str(run.paths[0])) == "device"
