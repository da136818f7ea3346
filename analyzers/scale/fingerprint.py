"""Which run a set of trace files is, by content: the same bytes under another name (a copy,
a hard link, a symbolic link, the folder moved) are the same run; another trace at the same
path is not.

A file's key is its size and a BLAKE2b digest of its first and last ``EDGE`` bytes (a trace
is a few MB to GB: reading two MiB of each keeps the check cheap; two traces of one job that
differ only in their middle would pass, which no capture makes: the header and the last
events hold the clock and the process ids). A run's fingerprint is the digest of its files'
keys, in sorted order, so neither the order nor the names given matter.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from pathlib import Path

EDGE = 1 << 20  # bytes read at each end of a file


def file_key(path: str | os.PathLike[str]) -> str | None:
    """The content key of one file (None: it cannot be read)."""
    h = hashlib.blake2b(digest_size=16)
    try:
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            h.update(size.to_bytes(8, "little"))
            h.update(fh.read(EDGE))
            if size > 2 * EDGE:
                fh.seek(size - EDGE)
            h.update(fh.read(EDGE))
    except OSError:
        return None
    return h.hexdigest()


def files_fingerprint(files: Iterable[str | os.PathLike[str]]) -> str | None:
    """The fingerprint of these trace files (None: one of them cannot be read, or none)."""
    keys = [file_key(f) for f in files]
    known = [k for k in keys if k is not None]
    if not keys or len(known) < len(keys):
        return None
    h = hashlib.blake2b(digest_size=16)
    for k in sorted(known):
        h.update(bytes.fromhex(k))
    return h.hexdigest()


def run_fingerprint(paths: Iterable[Path]) -> str | None:
    """The fingerprint of the run under ``paths`` (files or folders, as a command takes
    them); None when its traces cannot be listed or read."""
    from profplug.analyzers.core.errors import ProfplugError
    from profplug.analyzers.scale.load import trace_files

    try:
        return files_fingerprint(trace_files(list(paths)))
    except (ProfplugError, OSError):
        return None
