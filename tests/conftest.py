import sys
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))  # `from synth import ...`
sys.path.insert(0, str(HERE / "robustness"))  # `from bad_inputs import ...`
sys.path.insert(0, str(HERE.parent))  # `from tests.runtime._dist import ...`
