"""What a trace may make profplug inflate: the decompressed-size budget (``--max-decompressed``).

A small ``.gz`` can inflate a thousandfold (a decompression bomb). Every ``.json.gz`` and
``.sqlite.gz`` is inflated as a stream and counted; past the budget the read stops with a
one-line error that says how to raise it. The budget is ``ReadOptions.max_decompressed`` (the
CLI's ``--max-decompressed``), else ``$PROFPLUG_MAX_DECOMPRESSED``, else
``DEFAULT_MAX_DECOMPRESSED``. Plain files are not limited: their size is on the disk already.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from types import MappingProxyType

from profplug.analyzers.core.errors import ProfplugError, TraceError

ENV = "PROFPLUG_MAX_DECOMPRESSED"
DEFAULT_MAX_DECOMPRESSED = 2 << 30  # 2 GiB of JSON (or SQLite) per compressed file
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?\s*$", re.IGNORECASE)
_UNITS = MappingProxyType({"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40})


def parse_size(text: str) -> int:
    """``"2G"``, ``"512MiB"``, ``"1.5g"``, ``"100000"`` -> bytes; ProfplugError otherwise."""
    m = _SIZE.match(text)
    if not m or len(m.group(1)) > 20:
        raise ProfplugError(f"bad size {text!r} (expected e.g. 2G, 512M or a byte count)")
    n = int(float(m.group(1)) * _UNITS[m.group(2).lower()])
    if n <= 0:
        raise ProfplugError(f"bad size {text!r} (must be positive)")
    return n


def max_decompressed() -> int:
    """The budget in bytes: ``$PROFPLUG_MAX_DECOMPRESSED``, else the default."""
    text = os.environ.get(ENV, "")
    return parse_size(text) if text.strip() else DEFAULT_MAX_DECOMPRESSED


def human(n: int) -> str:
    for unit, size in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:g} {unit}"
    return f"{n} bytes"


def too_big(path: Path, limit: int) -> TraceError:
    return TraceError(f"{path}: inflates to more than {human(limit)} (a decompression bomb?); "
                      f"if the trace is real, raise the limit with --max-decompressed "
                      f"(or ${ENV})")
