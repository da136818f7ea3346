"""What-if replay: each rank's step time if chosen synchronizes did not block the host.

``predict`` runs it (``whatif``, ``whatif_paths``), ``model`` builds the run's dependency
model, ``simulate`` replays it, ``result`` holds the values; the renderers are in
``render/whatif_*.py``.

    >>> from profplug.analyzers.whatif import whatif_paths
    >>> res = whatif_paths(["runs/pp2/kineto"])
    >>> res.rank(0).predicted_us
"""

from .model import DROP_ALL, DROP_DEVICE, DropSpec, build_model
from .predict import whatif, whatif_analysis, whatif_paths
from .result import RankWhatIf, WhatIfResult
from .simulate import replay

__all__ = ["DROP_ALL", "DROP_DEVICE", "DropSpec", "RankWhatIf", "WhatIfResult", "build_model",
           "replay", "whatif", "whatif_analysis", "whatif_paths"]
