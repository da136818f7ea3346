"""The warm-up's assertion rewriting (tests/asserts_rewritten.py) writes what pytest itself
would: the same code as this session's rewriter, with this session's config, in a cache
pytest reads back."""

from __future__ import annotations

import io
import marshal
from pathlib import Path

import pytest
from _pytest.assertion import rewrite
from asserts_rewritten import rewrite_all

THIS = Path(__file__)


def test_a_rewrite_without_config_is_the_sessions_rewrite(pytestconfig) -> None:
    _, ours = rewrite._rewrite_test(THIS, None)
    _, sessions = rewrite._rewrite_test(THIS, pytestconfig)
    assert marshal.dumps(ours) == marshal.dumps(sessions)
    assert "@pytest_ar" in str(sessions.co_names)  # rewritten: not plain compiled asserts


def test_the_cache_it_writes_is_read_back_by_pytest_and_kept(tmp_path, pytestconfig) -> None:
    tests = tmp_path / "tests"
    (tests / "deep").mkdir(parents=True)
    module = tests / "deep" / "test_small.py"
    module.write_text("def test_x():\n    x = 1\n    assert x + 1 == 3, 'planted'\n")
    (tests / "conftest.py").write_text("X = 1\n")
    (tests / "helper.py").write_text("assert True\n")  # not a test module: left to pytest
    (tests / "test_broken.py").write_text("def (:\n")  # does not parse: left to pytest

    assert rewrite_all(tests) == 2
    cached = sorted(p.relative_to(tests).as_posix() for p in tests.rglob("*.pyc"))
    assert cached == [f"__pycache__/conftest{rewrite.PYC_TAIL}",
                      f"deep/__pycache__/test_small{rewrite.PYC_TAIL}"]
    pyc = module.parent / "__pycache__" / f"test_small{rewrite.PYC_TAIL}"
    sessions = io.BytesIO()  # the file this session's pytest would write
    rewrite._write_pyc_fp(sessions, *rewrite._rewrite_test(module, pytestconfig))
    assert pyc.read_bytes() == sessions.getvalue()
    code = rewrite._read_pyc(module, pyc)  # pytest's own reading of it: complete, current
    assert code is not None
    namespace: dict[str, object] = {}
    exec(code, namespace)
    test_x = namespace["test_x"]
    assert callable(test_x)
    with pytest.raises(AssertionError, match=r"planted\nassert \(1 \+ 1\) == 3"):
        test_x()

    assert rewrite_all(tests) == 0  # kept: a second warm-up writes nothing
    module.write_text("def test_x():\n    assert 2 == 2\n")
    assert rewrite._read_pyc(module, pyc) is None  # pytest's check: stale for a new source
