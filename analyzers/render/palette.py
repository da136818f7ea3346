"""One colour per quantity, on every page (report, compare, ab): the only place colours of
data are chosen. Pages, SVG figures and the report's script (``templates/report.js``, which
gets them in its data) read them from here, and each figure shows a legend built with
:func:`legend_html` / :func:`legend_svg`.

A colour names one quantity, and a quantity has one colour, whatever the figure:

- GPU time: ``compute`` (kernels and copies other than NCCL), ``comm`` (NCCL kernels; split,
  where the cross-rank analysis ran, into ``transfer`` and ``peer_wait``: the NCCL kernel
  waiting for its peer), ``comm_unmatched``; no figure draws compute and comm in one colour
  (the timeline draws each, as the bars and the swimlane do);
- GPU idle by cause (``gaps.CAUSES``) and the stream wait;
- ``profplug ab``'s policies (``policy_device`` ...), which are runs, not idle causes: their
  colours are not any quantity's above; a compare page draws a run whose ``run.json`` names
  its policy in that policy's colour (:func:`run_keys`), as the ab page does, else as
  ``run_a`` / ``run_b``;
- ``compare``'s answer: ``predicted`` (the what-if) and ``measured``;
- ranks (:func:`rank_style`): identities, drawn as lines and markers only, in
  :data:`RANK_COLORS` and, past those, the same colours dashed (:data:`RANK_DASHES`).

A policy, a rank and a quantity never share a colour, nor one of a hue and lightness close
to another's (``tests/unit/analyzers/render/test_palette.py`` measures it: CIE76 distance in Lab,
halved for two colours of one hue family).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from profplug.analyzers.render.escape import e

COLORS: Mapping[str, str] = MappingProxyType({
    # GPU time
    "compute": "#4c78a8",
    "comm": "#72b7b2",
    "transfer": "#72b7b2",  # the part of comm that moves data: comm's colour
    "peer_wait": "#eeca3b",
    "comm_unmatched": "#bab0ac",
    # idle by cause
    "device_sync": "#e45756",
    "event_sync": "#f58518",
    "host_bound": "#b279a2",
    "other": "#9d9d9d",
    "stream_wait": "#54a24b",
    # cross-rank marks
    "handoff": "#222222",
    "path": "#000000",
    # ab policies (runs): brown, olive, wine
    "policy_device": "#663300",
    "policy_event": "#808000",
    "policy_none": "#99004d",
    # compare's answer
    "predicted": "#6a3d9a",
    "measured": "#17becf",
    "run_a": "#525252",
    "run_b": "#1a3366",
})

LABELS: Mapping[str, str] = MappingProxyType({
    "compute": "compute", "comm": "comm (NCCL)", "transfer": "NCCL transfer",
    "peer_wait": "NCCL peer wait", "comm_unmatched": "NCCL unmatched",
    "device_sync": "device_sync", "event_sync": "event_sync", "host_bound": "host_bound",
    "other": "other", "stream_wait": "stream wait", "handoff": "handoff",
    "path": "critical path", "policy_device": "device", "policy_event": "event",
    "policy_none": "none", "predicted": "predicted (what-if)", "measured": "measured",
    "run_a": "run A steps", "run_b": "run B steps",
})

# dark hues no quantity nor policy above uses (indigo, maroon, dark teal, magenta, forest):
# a rank's line is never read as an idle cause or a policy; rank 5 on: the same, dashed
RANK_COLORS = ("#1a1acc", "#80001a", "#00664d", "#cc00cc", "#1a4d00")
RANK_DASHES = ("", "6 3", "2 2")
GREY = "#9d9d9d"
POLICIES = ("device", "event", "none")


def rank_style(i: int) -> tuple[str, str]:
    """The ``i``-th rank's line colour and SVG dash pattern ("" solid)."""
    n = len(RANK_COLORS)
    return RANK_COLORS[i % n], RANK_DASHES[(i // n) % len(RANK_DASHES)]


def run_keys(policy_a: str | None, policy_b: str | None) -> tuple[str, str]:
    """The palette keys of a compare page's runs A and B: their policies' (as on the ab
    page) when both runs name a different one, else ``run_a`` / ``run_b``."""
    if policy_a in POLICIES and policy_b in POLICIES and policy_a != policy_b:
        return f"policy_{policy_a}", f"policy_{policy_b}"
    return "run_a", "run_b"


def color(key: str) -> str:
    """The colour of a quantity (KeyError for an unknown one: add it here)."""
    return COLORS[key]


def policy_color(policy: str) -> str:
    """An ab policy's colour (grey for a policy without one)."""
    return COLORS.get(f"policy_{policy}", GREY)


def legend_html(keys: list[str] | tuple[str, ...], labels: dict[str, str] | None = None
                ) -> str:
    """A legend (``<div class="legend">``) with one swatch per quantity, each carrying
    ``data-key`` and its colour in ``data-color``."""
    names = {**LABELS, **(labels or {})}
    return ('<div class="legend">' + "".join(
        f'<span class="key" data-key="{e(k)}" data-color="{COLORS[k]}"><i style="background:'
        f'{COLORS[k]}"></i>{e(names.get(k, k))}</span>' for k in keys) + "</div>")
