"""``profplug ab``: an A/B of sync policies over interleaved, unprofiled runs.

``plan`` orders the runs, ``stats`` holds the statistics (medians, bootstrap CIs over
rounds, paired speedups), ``digestcheck`` compares the runs' output digests, ``analyze``
turns run records into an ``AbResult`` (``result``), ``overlay`` sets a what-if prediction
against it. The launcher is ``profplug.session.abrun``; the renderers are
``render/ab_table.py`` and ``render/ab_html.py``. docs/ab.md has the details.
"""

from profplug.analyzers.ab.analyze import analyze_ab
from profplug.analyzers.ab.digestcheck import DigestCheck, Mismatch, check_digests
from profplug.analyzers.ab.plan import ORDERS, parse_policies, schedule
from profplug.analyzers.ab.result import AbResult, PolicySummary, RankSummary

__all__ = ["ORDERS", "AbResult", "DigestCheck", "Mismatch", "PolicySummary", "RankSummary",
           "analyze_ab", "check_digests", "parse_policies", "schedule"]
