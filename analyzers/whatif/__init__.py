"""What-if replay: each rank's step time if chosen synchronizes did not block the host.

``predict`` runs it (``whatif``, ``whatif_paths``), ``model`` builds the run's dependency
model (``rankmodel``: one rank's part; ``host``: the host work a dropped call takes with it;
``dropset``: which calls are dropped), ``graph`` turns it into edge arrays, ``simulate``
replays it as one longest-path pass
(``costs.HostCosts``: at other host costs), ``band`` sets each rank's error band,
``streamruns`` and ``fixedpoint`` solve parts of it in closed form,
``dropset`` says which synchronizes are dropped (by default those the sync policy
changes), ``unprofiled`` predicts at an unprofiled run's host speed (``whatif_unprofiled``), ``result``
holds the values; the renderers are in ``render/whatif_*.py``.

    >>> from profplug.analyzers.whatif import whatif_paths
    >>> res = whatif_paths(["runs/pp2/kineto"])
    >>> res.rank(0).predicted_us
"""

from profplug.analyzers.graph.dropset import DROP_POLICY
from profplug.analyzers.graph.model import DROP_ALL, DROP_DEVICE, DropSpec, build_model
from profplug.analyzers.whatif.costs import HostCosts
from profplug.analyzers.whatif.predict import whatif, whatif_analysis, whatif_paths
from profplug.analyzers.whatif.result import RankWhatIf, WhatIfResult
from profplug.analyzers.whatif.simulate import replay
from profplug.analyzers.whatif.unprofiled import whatif_unprofiled

__all__ = ["DROP_ALL", "DROP_DEVICE", "DROP_POLICY", "DropSpec", "HostCosts", "RankWhatIf", "WhatIfResult",
           "build_model", "replay", "whatif", "whatif_analysis", "whatif_paths",
           "whatif_unprofiled"]
