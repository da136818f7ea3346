"""What-if replay: each rank's step time if chosen synchronizes did not block the host.

``predict`` runs it (``whatif``) on the run's dependency graph (``graph/``: ``model``,
``events``, ``dropset``), ``simulate`` replays it as one longest-path pass (the solver:
``graph.longest_path``; ``visited``, ``streamruns``, ``fixedpoint`` shrink what it visits), ``bands`` sets
each rank's error band and ``bound`` the data-flow bound, ``costs.HostCosts`` replays at other
host costs, ``unprofiled`` predicts at an unprofiled run's host speed (``whatif_unprofiled``),
``rounds`` runs it where the ranks are read, ``against`` lines a prediction up with a
measured run, ``result`` holds the values; the renderers are in ``render/whatif_*.py``.

    >>> from profplug.analyzers import whatif_paths
    >>> res = whatif_paths(["runs/pp2/kineto"])
    >>> res.rank(0).predicted_us
"""

from profplug.analyzers.graph.dropset import DROP_POLICY
from profplug.analyzers.graph.model import DROP_ALL, DROP_DEVICE, DropSpec, build_model
from profplug.analyzers.whatif.analysis import whatif_analysis
from profplug.analyzers.whatif.costs import HostCosts
from profplug.analyzers.whatif.predict import whatif
from profplug.analyzers.whatif.result import RankWhatIf, WhatIfResult
from profplug.analyzers.whatif.simulate import replay
from profplug.analyzers.whatif.unprofiled import whatif_unprofiled

__all__ = ["DROP_ALL", "DROP_DEVICE", "DROP_POLICY", "DropSpec", "HostCosts", "RankWhatIf", "WhatIfResult",
           "build_model", "replay", "whatif", "whatif_analysis",
           "whatif_unprofiled"]
