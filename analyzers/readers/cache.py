"""The per-rank cache (``--cache DIR``, ``$PROFPLUG_CACHE``): parse a trace once, read it many
times.

A cache entry holds the normalized Timelines of one trace file (one per rank it holds), in
the timeline's own columnar format (``Timeline.save``: numpy arrays + a JSON header, no
pickle), stored uncompressed so that a hit costs one sequential read and no inflate. The
entry's name is a key over everything that decides what the reader produces:

- the trace: its absolute path and its content (:func:`file_identity`): a SHA-256 of the
  whole file up to ``FULL_HASH_BYTES``; beyond, what no write can leave unchanged: size,
  mtime, ctime (set by the kernel on every write; ``touch``, ``cp -p`` or ``rsync -t`` cannot
  set it back) and inode, with a SHA-256 of the first, middle and last ``SAMPLE_BYTES``;
- the files read with it (:func:`companions`): an Nsight export's ``-wal`` and ``-journal``
  (uncheckpointed rows the reader replays), its ``.nsys-rep``/``.qdrep`` twin, or a report's
  export; each identified the same way, an absent one as absent. Not the ``-shm`` (SQLite's
  index of the WAL, rebuilt from it: no rows, never read);
- the reader: its name and ``reader_fingerprint()``, a hash of the source of every module
  that shapes a Timeline (``readers/*.py``, ``timeline``, ``steps.rule``, ``commops``): any
  change to a reader invalidates every entry, no version number to forget;
- the read: the file's index in the run (a rank of last resort), the step rule and the
  ``--max-decompressed`` budget.

The cache only ever writes under DIR (never beside the input unless DIR is that folder),
and marks DIR as a cache (``CACHEDIR.TAG``: trace listings and backup tools skip it).
Writes go to a temporary file in DIR, then ``os.replace``: a concurrent writer of the same
entry wins or loses whole, a reader never sees half a file; an entry is written only when
no file it was read from changed during the read. An entry names its source (the trace's
path and key, checked on load: another trace's entry copied under this name is a miss) and
is opened only when it is a regular file (a FIFO there would block). A damaged entry, one
whose arrays do not make a Timeline (:func:`timeline_problem`), is a miss. The analyses
never know: the cache is part of reading.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import stat
import tempfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from types import MappingProxyType
from typing import Any, BinaryIO

import numpy as np
from profplug.analyzers.core import atomicfile
from profplug.analyzers.core.timeline import COMM_KINDS, COMM_SOURCES, KIND_NAMES, Timeline
from profplug.analyzers.readers.base import Reader, ReadOptions
from profplug.analyzers.readers.nsys.source import REPORT_SUFFIXES, export_path
from profplug.analyzers.readers.nsys.tmpfiles import SIDECARS

FULL_HASH_BYTES = 256 << 20  # files up to this size are keyed on a hash of all their bytes
SAMPLE_BYTES = 1 << 20  # beyond: hashed at the head, the middle and the tail
FORMAT = 2  # the layout of an entry (bump when it changes)
TAG_NAME = "CACHEDIR.TAG"  # marks the folder as a cache (bford.info/cachedir)
TAG_SIGNATURE = b"Signature: 8a477f597d28d172789f06886806bc55"
TAG = TAG_SIGNATURE + b"\n# a profplug cache (--cache): trace listings skip this folder\n"
_SHAPING = ("core/timeline.py", "core/classify.py", "steps/rule.py")  # outside readers/


def shaping_sources() -> list[Path]:
    """The sources that shape a Timeline: every module under readers/, and ``_SHAPING``."""
    here = Path(__file__).resolve().parent
    return sorted(here.rglob("*.py")) + [here.parent / n for n in _SHAPING]


def fingerprint(files: list[Path]) -> str:
    """16 hex digits of a hash of ``files``' names and bytes (and the cache ``FORMAT``)."""
    h = hashlib.sha256(str(FORMAT).encode())
    for f in files:
        if f.is_file():
            h.update(f.name.encode())
            h.update(f.read_bytes())
    return h.hexdigest()[:16]


@cache
def reader_fingerprint() -> str:
    """The fingerprint of the sources that shape a Timeline (computed once per process)."""
    return fingerprint(shaping_sources())


def _open_regular(path: Path) -> tuple[int, os.stat_result]:
    """``path`` opened for reading without blocking (a FIFO opens at once), and its stat;
    OSError when it is not a regular file."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise OSError(f"{path}: not a regular file")
    return fd, st


def _stamp(st: os.stat_result) -> tuple[int, int, int, int]:
    """What any write through the file system changes (ctime: no user tool can set it)."""
    return (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)


def file_identity(path: Path) -> dict[str, object] | None:
    """What keys ``path``'s content: None when absent; its kind when not a regular file;
    up to ``FULL_HASH_BYTES`` the size and a SHA-256 of every byte (a change anywhere
    misses, whatever the times say); beyond, size, mtime, ctime and inode (a write sets
    ctime, which ``touch``/``cp -p``/``rsync -t`` cannot set back) and a SHA-256 of the first,
    middle and last ``SAMPLE_BYTES``. OSError when it cannot be read (or changed while
    hashed)."""
    try:
        fd, st = _open_regular(path)
    except FileNotFoundError:
        return None
    except OSError:
        try:
            return {"kind": stat.S_IFMT(os.stat(path).st_mode)}
        except FileNotFoundError:
            return None
    h = hashlib.sha256()
    with os.fdopen(fd, "rb", buffering=0) as fh:
        size = st.st_size
        if size <= FULL_HASH_BYTES:
            buf = bytearray(SAMPLE_BYTES)
            view = memoryview(buf)
            got = 0
            while (n := fh.readinto(buf)):
                h.update(view[:n])
                got += n
            if got != size or _stamp(os.fstat(fd)) != _stamp(st):
                raise OSError(f"{path}: changed while it was read")
            return {"size": size, "sha256": h.hexdigest()}
        for at in (0, size // 2 - SAMPLE_BYTES // 2, size - SAMPLE_BYTES):
            fh.seek(at)
            h.update(fh.read(SAMPLE_BYTES))
    size, mtime_ns, ctime_ns, ino = _stamp(st)
    return {"size": size, "mtime_ns": mtime_ns, "ctime_ns": ctime_ns, "ino": ino,
            "samples": h.hexdigest()}


def companions(path: Path) -> list[Path]:
    """The files a reader reads with ``path`` (present or not): an Nsight export's
    ``-wal``/``-journal`` and the report it may be exported again from; a report's export
    and that export's ``-wal``/``-journal``."""
    name = path.name.lower()
    if name.endswith(REPORT_SUFFIXES):
        db = export_path(path)
        return [db, *(db.with_name(db.name + s) for s in SIDECARS)]
    if name.endswith(".sqlite"):
        stem = path.name[: -len(".sqlite")]
        return [*(path.with_name(path.name + s) for s in SIDECARS),
                *(path.with_name(stem + s) for s in REPORT_SUFFIXES)]
    return []


def witness(path: Path) -> list[tuple[int, int, int, int] | None]:
    """Stat-only stamps of ``path`` and its companions: unchanged across a read, no file
    the read used was written meanwhile."""
    out: list[tuple[int, int, int, int] | None] = []
    for f in (path, *companions(path)):
        try:
            out.append(_stamp(os.stat(f)))
        except OSError:
            out.append(None)
    return out


@dataclass(frozen=True)
class EntryKey:
    """An entry's key (hex) and the stamps of its files taken just before they were hashed
    (:func:`witness`): :func:`read_cached` writes the entry only if none changed since."""

    key: str
    stamps: tuple[tuple[int, int, int, int] | None, ...]


def cache_key(path: Path, index: int, reader: Reader, options: ReadOptions) -> str:
    """The entry's key (hex): trace identity + reader version + read options."""
    return _keyed(path, index, reader, options).key


def _keyed(path: Path, index: int, reader: Reader, options: ReadOptions) -> EntryKey:
    p = path.resolve()
    seen = witness(p)  # before the hashing: read_cached saves only if no file changed since
    content = file_identity(p)
    if content is None or "kind" in content:
        raise OSError(f"{p}: not a regular file")
    parts = {"path": str(p), "content": content,
             "companions": {f.name: file_identity(f) for f in companions(p)},
             "reader": reader.name, "reader_version": reader_fingerprint(), "index": index,
             "steps": repr(options.steps), "max_decompressed": options.max_decompressed}
    key = hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:32]
    return EntryKey(key, tuple(seen))


def entry_path(cache_dir: str | Path, path: Path, key: str) -> Path:
    """Where the entry of ``path`` lives: ``DIR/<file name>.<key>.npz`` (a name users can
    recognize when they prune the folder)."""
    return Path(cache_dir) / f"{path.name[:80]}.{key}.npz"


def open_entry(entry: Path, max_bytes: int | None = None) -> bytes | None:
    """The bytes of a cache entry; None when it is missing, not a regular file (a FIFO
    would block, a device never ends), larger than ``max_bytes`` or unreadable."""
    try:
        fd, st = _open_regular(entry)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as fh:
        if max_bytes is not None and st.st_size > max_bytes:
            return None
        try:
            return fh.read()
        except OSError:
            return None


def _source(path: Path, key: str) -> np.ndarray:
    doc = {"path": str(path.resolve()), "key": key}
    return np.frombuffer(json.dumps(doc, sort_keys=True).encode(), dtype=np.uint8)


def load_entry(entry: Path, path: Path | None = None, key: str | None = None
               ) -> list[Timeline] | None:
    """The Timelines of an entry, or None when it is missing, damaged, not a regular file,
    of another source than ``path`` with ``key`` (when given), or holds arrays that do not
    make a Timeline (a miss)."""
    data = open_entry(entry)
    if data is None:
        return None
    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as z:
            if path is not None and key is not None and (
                    "source" not in z.files
                    or bytes(z["source"]).decode() != bytes(_source(path, key)).decode()):
                return None
            names = [k for k in z.files if k != "source"]
            blobs = [z[k] for k in sorted(names, key=lambda k: int(k[1:]))]
        del data
        tls = [Timeline.load(io.BytesIO(b.tobytes())) for b in blobs]
    except (OSError, ValueError, KeyError, TypeError, EOFError, IndexError,
            UnicodeDecodeError, AttributeError, zipfile.BadZipFile):
        return None
    if any(timeline_problem(t) for t in tls):
        return None
    return tls


_TABLES = MappingProxyType({t: tuple(k for k in Timeline._ARRAYS if k.startswith(t + "_"))
                            for t in ("gpu", "api", "ann", "gsync", "step", "comm")})
_NAME_IDS = ("gpu_name", "api_name", "ann_name", "comm_name")
_ENUMS = MappingProxyType({"gpu_kind": len(KIND_NAMES), "comm_kind": len(COMM_KINDS),
                           "comm_src": len(COMM_SOURCES)})
_HEADER = MappingProxyType({"rank": int, "source": str, "rank_rule": str, "files": list, "names": list,
                            "warnings": list, "skipped": dict, "metadata": dict, "has_gpu_sync_records": bool})


def timeline_problem(tl: Timeline) -> str | None:
    """Why ``tl`` (loaded from an entry) is not a Timeline a reader could have made, None
    when it is: each column 1-D with its dtype, each table's columns of one length, name
    ids within the symbol table, kinds within their enumerations, ``api_top`` indices
    within the API table, header fields of their types."""
    for f, t in _HEADER.items():
        v = getattr(tl, f)
        if not isinstance(v, t) or (t is int and isinstance(v, bool)):
            return f"{f} is not a {t.__name__}"
    if tl.steps_rule is not None and not isinstance(tl.steps_rule, str):
        return "steps_rule is not a string"
    if not all(isinstance(x, str) for x in (*tl.names, *tl.files, *tl.warnings)):
        return "names, files and warnings are strings"
    if not all(isinstance(k, str) and isinstance(v, int) for k, v in tl.skipped.items()):
        return "skipped counts"
    want = Timeline(rank=0, source="", files=[])
    for table, cols in _TABLES.items():
        n = None
        for c in cols:
            a = getattr(tl, c)
            if not isinstance(a, np.ndarray) or a.ndim != 1 or \
                    a.dtype != getattr(want, c).dtype:
                return f"{c}: not a 1-D {getattr(want, c).dtype} column"
            if n is None:
                n = a.size
            elif a.size != n:
                return f"{table}: columns of unequal lengths"
    n_names = len(tl.names)
    for c in _NAME_IDS:
        a = getattr(tl, c)
        if a.size and (int(a.min()) < 0 or int(a.max()) >= n_names):
            return f"{c}: ids outside the symbol table"
    g = tl.comm_group
    if g.size and (int(g.min()) < -1 or int(g.max()) >= n_names):
        return "comm_group: ids outside the symbol table"
    for c, n in _ENUMS.items():
        a = getattr(tl, c)
        if a.size and (int(a.min()) < 0 or int(a.max()) >= n):
            return f"{c}: outside its {n} kinds"
    top = tl.api_top
    if top.size and (int(top.min()) < 0 or int(top.max()) >= top.size):
        return "api_top: indices outside the API table"
    return None


def save_entry(entry: Path, timelines: list[Timeline], path: Path | None = None,
               key: str | None = None) -> None:
    """Write an entry atomically (temporary file in the same folder, then rename), naming
    its source (``path`` and ``key``). A cache that cannot be written is skipped silently:
    it only makes the next run slower."""
    blobs: dict[str, Any] = {}  # np.savez's keyword arrays
    if path is not None and key is not None:
        blobs["source"] = _source(path, key)
    for i, tl in enumerate(timelines):
        buf = io.BytesIO()
        tl.save(buf, compress=False)
        blobs[f"t{i}"] = np.frombuffer(buf.getbuffer(), dtype=np.uint8)
    try:
        entry.parent.mkdir(parents=True, exist_ok=True)
    except OSError:
        return
    mark(entry.parent)
    write_atomic(entry, lambda fh: np.savez(fh, **blobs), ".npz")


def write_atomic(path: Path, write: Callable[[BinaryIO], object], suffix: str) -> None:
    """``write(file)`` into ``path`` whole (``core.atomicfile``: a concurrent reader sees the
    old entry or the new one, never a part); readable by the others who share the folder.
    A failure leaves nothing behind and is silent: a cache entry not written only makes the
    next run slower. ``suffix``: kept for callers; the temporary's name ends in ``path``'s."""
    try:
        atomicfile.write_atomic(path, write)
        os.chmod(path, 0o644)
    except OSError:
        pass


def mark(cache_dir: str | Path) -> None:
    """Tag ``cache_dir`` as a cache (``CACHEDIR.TAG``) when it is not yet: a trace listing
    (``load.trace_files``) and backup tools skip it. Silent when it cannot."""
    tag = Path(cache_dir) / TAG_NAME
    if not os.path.lexists(tag):
        write_atomic(tag, lambda fh: fh.write(TAG), ".tag")


def is_cache_dir(folder: str | Path) -> bool:
    """Whether ``folder`` is tagged as a cache (``CACHEDIR.TAG`` with its signature)."""
    data = open_entry(Path(folder) / TAG_NAME, max_bytes=4096)
    return data is not None and data.startswith(TAG_SIGNATURE)


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
    mark(d)
    return None


def entry_key(reader: Reader, path: Path, index: int, options: ReadOptions
              ) -> EntryKey | None:
    """The key of ``path``'s entry (:func:`cache_key`) with its files' stamps; None when the
    file cannot be stat'ed or read (the reader will say what is wrong with it)."""
    try:
        return _keyed(path, index, reader, options)
    except OSError:
        return None


def read_cached(reader: Reader, path: Path, index: int, options: ReadOptions,
                cache_dir: str | Path | None, key: EntryKey | None = None
                ) -> tuple[list[Timeline], bool, str | None]:
    """``reader.read(path, index, options)`` through the cache in ``cache_dir`` (None: no
    cache); also whether it was a hit, and the entry's key (None without the cache: the
    analysis results are cached under the keys of the files, ``scale.result_cache``). ``key``:
    the entry's key when the caller has it (:func:`entry_key`)."""
    if cache_dir is None:
        return reader.read(path, index, options), False, None
    keyed = key or entry_key(reader, path, index, options)
    if keyed is None:
        return reader.read(path, index, options), False, None
    entry = entry_path(cache_dir, path, keyed.key)
    hit = load_entry(entry, path, keyed.key)
    if hit is not None:
        return hit, True, keyed.key
    timelines = reader.read(path, index, options)
    # written only when no file it was read from changed since it was hashed
    if tuple(witness(path.resolve())) == keyed.stamps:
        save_entry(entry, timelines, path, keyed.key)
    return timelines, False, keyed.key
