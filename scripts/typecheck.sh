#!/usr/bin/env bash
# mypy --strict over analyzers/ and profplug/ as installed, and no unexplained type-ignore:
# the suite's own check (tests/unit/test_typecheck.py), alone. Its mypy cache stays in
# .pytest_cache/d/mypy, so a second run is incremental. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
exec "${PYTHON:-.venv/bin/python}" -m pytest -q -p no:randomly tests/unit/test_typecheck.py "$@"
