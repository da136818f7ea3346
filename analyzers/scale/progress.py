"""The progress line of long reads: traces done / total and bytes read, on stderr.

Shown when stderr is a terminal, unless ``--quiet``; the local pool and the Dask backend
feed it the same way (one ``done`` per finished file, from the client).
"""

from __future__ import annotations

import sys
from typing import TextIO

from profplug.analyzers.scale.dispatch import FileResult


class Progress:
    """``reading traces [#####     ] 12/64 files, 1.20/3.40 GB (3 cached)``."""

    WIDTH = 30

    def __init__(self, total_files: int, total_bytes: int, show: bool,
                 out: TextIO | None = None) -> None:
        self.total_files, self.total_bytes, self.show = total_files, total_bytes, show
        self.files = self.bytes = self.cached = self.ranks = 0
        self.out = out or sys.stderr

    def done(self, res: FileResult) -> None:
        self.files += 1
        self.bytes += res.size_bytes
        self.ranks += res.n_ranks
        self.cached += res.cached
        if self.show:
            bar = "#" * (self.WIDTH * self.files // max(self.total_files, 1))
            size = (f"{self.bytes / 1e9:.2f}/{self.total_bytes / 1e9:.2f} GB"
                    if self.total_bytes >= 10**8 else
                    f"{self.bytes / 1e6:.1f}/{self.total_bytes / 1e6:.1f} MB")
            cached = f", {self.cached} cached" if self.cached else ""
            print(f"\rreading traces [{bar:<{self.WIDTH}}] {self.files}/{self.total_files} "
                  f"files ({self.ranks} ranks), {size}{cached}", end="", file=self.out)

    def close(self) -> None:
        if self.show and self.files:
            print(file=self.out)
