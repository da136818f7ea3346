import sys
from pathlib import Path
from types import ModuleType

import pytest

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))  # `from synth import ...`
sys.path.insert(0, str(HERE / "robustness"))  # `from bad_inputs import ...`
sys.path.insert(0, str(HERE.parent))  # `from tests.runtime._dist import ...`


@pytest.fixture(scope="session")
def samples() -> ModuleType:
    """The shipped sample runs, each read and analyzed once per session: ``samples.report(run)``,
    ``samples.stalls(run)``, ``samples.whatif(run)``, ``samples.cross_rank(run)``,
    ``samples.timelines(run)`` (tests/sample_cache.py; modules may import it directly)."""
    import sample_cache

    return sample_cache
