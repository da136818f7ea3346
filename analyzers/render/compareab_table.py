"""The terminal view of ``compare A AB_DIR`` (``AbComparison``)."""

from __future__ import annotations

import textwrap
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from profplug.analyzers.compare.ab_runs import AbComparison


def render_compareab_table(cmp: AbComparison, out: TextIO) -> None:
    w = out.write
    for text in (f"profplug compare · A = {cmp.label_a} (traced) · B = {cmp.label_b} "
                 f"(profplug ab, policy {cmp.policy})",
                 *[f"warning: {m}" for m in cmp.warnings], "",
                 cmp.answer.sentence(cmp.label_a, cmp.label_b),
                 f"(A's what-if at ab's unprofiled device step {cmp.calibrated_on_us:,.1f} us;"
                 f" the measurement {'inside' if cmp.answer.within_band else 'outside'} the "
                 "prediction's band)", *([f"ab: {cmp.ab_verdict}"] if cmp.ab_verdict else [])):
        w("\n".join(textwrap.wrap(text, 80, subsequent_indent="  ")) + "\n")
