"""The per-rank cache (``--cache DIR``, ``$PROFPLUG_CACHE``): parse a trace once, read it many
times.

A cache entry holds the normalized Timelines of one trace file (one per rank it holds), in
the timeline's own columnar format (``Timeline.save``: numpy arrays + a JSON header, no
pickle), stored uncompressed so that a hit costs one sequential read and no inflate. The
entry's name is a key over everything that decides what the reader produces:

- the trace: its absolute path, size, mtime (ns) and a hash of its first and last
  ``EDGE_BYTES`` (a file rewritten in place with the same size and mtime still misses);
- the reader: its name and ``reader_fingerprint()``, a hash of the source of every module
  that shapes a Timeline (``readers/*.py``, ``timeline``, ``steprule``, ``commops``): any
  change to a reader invalidates every entry, no version number to forget;
- the read: the file's index in the run (a rank of last resort), the step rule and the
  ``--max-decompressed`` budget.

The cache only ever writes under DIR (never beside the input unless DIR is that folder).
Writes go to a temporary file in DIR, then ``os.replace``: a concurrent writer of the same
entry wins or loses whole, a reader never sees half a file. A damaged entry is a miss.
The analyses never know: the cache is part of reading.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import tempfile
import zipfile
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import BinaryIO

import numpy as np

from ..timeline import Timeline
from .base import Reader, ReadOptions

EDGE_BYTES = 1 << 20  # hashed at the head and the tail of every trace
FORMAT = 1  # the layout of an entry (bump when it changes)
_SHAPING = ("timeline.py", "steprule.py", "commops.py", "classify.py")


@cache
def reader_fingerprint() -> str:
    """A hash of the source of every module that shapes a Timeline (computed once)."""
    here = Path(__file__).resolve().parent
    files = sorted(here.glob("*.py")) + [here.parent / n for n in _SHAPING]
    h = hashlib.sha256(str(FORMAT).encode())
    for f in files:
        if f.is_file():
            h.update(f.name.encode())
            h.update(f.read_bytes())
    return h.hexdigest()[:16]


def _edges(path: Path, size: int) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        h.update(fh.read(EDGE_BYTES))
        if size > EDGE_BYTES:
            fh.seek(max(EDGE_BYTES, size - EDGE_BYTES))
            h.update(fh.read(EDGE_BYTES))
    return h.hexdigest()


def cache_key(path: Path, index: int, reader: Reader, options: ReadOptions) -> str:
    """The entry's key (hex): trace identity + reader version + read options."""
    p = path.resolve()
    st = p.stat()
    parts = {"path": str(p), "size": st.st_size, "mtime_ns": st.st_mtime_ns,
             "edges": _edges(p, st.st_size), "reader": reader.name,
             "reader_version": reader_fingerprint(), "index": index,
             "steps": repr(options.steps), "max_decompressed": options.max_decompressed}
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:32]


def entry_path(cache_dir: str | Path, path: Path, key: str) -> Path:
    """Where the entry of ``path`` lives: ``DIR/<file name>.<key>.npz`` (a name users can
    recognize when they prune the folder)."""
    return Path(cache_dir) / f"{path.name[:80]}.{key}.npz"


def load_entry(entry: Path) -> list[Timeline] | None:
    """The Timelines of an entry, or None when it is missing or damaged (a miss)."""
    try:
        with np.load(entry, allow_pickle=False) as z:
            blobs = [z[k] for k in sorted(z.files, key=lambda k: int(k[1:]))]
        return [Timeline.load(io.BytesIO(b.tobytes())) for b in blobs]
    except (OSError, ValueError, KeyError, TypeError, EOFError, zipfile.BadZipFile):
        return None


def save_entry(entry: Path, timelines: list[Timeline]) -> None:
    """Write an entry atomically (temporary file in the same folder, then rename). A cache
    that cannot be written is skipped silently: it only makes the next run slower."""
    blobs: dict[str, np.ndarray] = {}
    for i, tl in enumerate(timelines):
        buf = io.BytesIO()
        tl.save(buf, compress=False)
        blobs[f"t{i}"] = np.frombuffer(buf.getbuffer(), dtype=np.uint8)
    try:
        entry.parent.mkdir(parents=True, exist_ok=True)
    except OSError:
        return
    write_atomic(entry, lambda fh: np.savez(fh, **blobs), ".npz")


def write_atomic(path: Path, write: Callable[[BinaryIO], object], suffix: str) -> None:
    """``write(file)`` into a temporary file in ``path``'s folder, then rename it to ``path``
    (a concurrent reader sees the old entry or the new one, never a part); readable by the
    others who share the folder (mkstemp makes it 0600). A failure leaves nothing behind
    and is silent: a cache entry not written only makes the next run slower."""
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=suffix)
        with os.fdopen(fd, "wb") as fh:
            write(fh)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
        tmp = None
    except OSError:
        pass
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass


def unusable(cache_dir: str | Path) -> str | None:
    """Why the cache folder cannot be written (created if missing), None when it can: asked
    once where loading starts, so a ``--cache`` that cannot work is said once, not skipped
    silently entry by entry."""
    d = Path(cache_dir)
    try:
        d.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=d, prefix=".probe-")
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        return exc.strerror or str(exc)
    return None


def entry_key(reader: Reader, path: Path, index: int, options: ReadOptions) -> str | None:
    """The key of ``path``'s entry (:func:`cache_key`); None when the file cannot be
    stat'ed or read (the reader will say what is wrong with it)."""
    try:
        return cache_key(path, index, reader, options)
    except OSError:
        return None


def read_cached(reader: Reader, path: Path, index: int, options: ReadOptions,
                cache_dir: str | Path | None, key: str | None = None
                ) -> tuple[list[Timeline], bool, str | None]:
    """``reader.read(path, index, options)`` through the cache in ``cache_dir`` (None: no
    cache); also whether it was a hit, and the entry's key (None without the cache: the
    analysis results are cached under the keys of the files, ``resultcache``). ``key``:
    the entry's key when the caller has it (:func:`entry_key`)."""
    if cache_dir is None:
        return reader.read(path, index, options), False, None
    key = key or entry_key(reader, path, index, options)
    if key is None:
        return reader.read(path, index, options), False, None
    entry = entry_path(cache_dir, path, key)
    hit = load_entry(entry)
    if hit is not None:
        return hit, True, key
    timelines = reader.read(path, index, options)
    save_entry(entry, timelines)
    return timelines, False, key
