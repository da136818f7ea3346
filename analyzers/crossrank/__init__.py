"""Cross-rank analysis: pipeline bubbles, who waits for whom, the critical path, the drain.

``matching`` pairs every NCCL kernel with its partners on the other ranks, ``bubbles``
splits NCCL time into transfer and peer wait, ``critical`` walks each step's critical path
across ranks, ``drain`` measures the host lead and launch-queue depth, ``swimlane`` keeps plot
data, ``analysis`` runs them all, ``result`` holds the values (docs/crossrank.md).

    >>> from profplug.analyzers.crossrank import cross_rank
    >>> res = cross_rank(load_timelines(["runs/pp4/kineto"]))
    >>> res.bubble(1).bubble_ns, res.critical_path.by_rank
"""

from profplug.analyzers.crossrank.analysis import cross_rank, cross_rank_analysis
from profplug.analyzers.crossrank.frames import bubbles_frame, critical_path_frame
from profplug.analyzers.crossrank.result import CriticalPath, CrossRankResult

__all__ = ["CriticalPath", "CrossRankResult", "bubbles_frame", "critical_path_frame",
           "cross_rank", "cross_rank_analysis"]
