"""Analysis results in the per-rank cache: a report on unchanged traces skips its analyses.

Per file, its ranks' stall analyses (``ranks-<key>.json``: the RankResult, numpy arrays
as base64 of their bytes with their dtype and shape) under the file's entry key, the
analyzer's fingerprint and the stall options (``stalls_entry``): a hit skips the per-rank
analysis, and a per-rank report (no run-level analysis) does not even load the timelines.
Per run, the run-level results, below.

The per-rank cache (``readers.cache``) skips the parse; what is left of a cached re-run is
the analyses, and the what-if (a replay of every event of every rank) is most of it. A
run-level result is a function of the run's timelines (the entries' keys say which), the
stall options, the analysis' own parameters and the analyzer's code, so it is kept in the
same folder under a key over all of them:

- the key of every trace file's entry, in run order (``FileResult.key``: the trace's
  identity, the reader's fingerprint, the read options);
- ``analyzer_fingerprint()``: a hash of the source of every module of the analyzer and of
  the versions of Python, numpy and msgspec, so any change to any analysis (or to the
  arithmetic under it) invalidates every result, no version to forget;
- the analysis' ``cache_key`` (its name and parameters, e.g. the what-if's drop rule; an
  analysis without one is never cached) and the stall options.

An entry is its own key and the result's ``key`` on one line, then the result as JSON
(msgspec, decoded into the result's class by its type annotations: no pickle), named
``run-<key>.json``; a ``ranks-`` entry starts with its own key too. An entry whose recorded
key is not its name's (another run's entry copied under this name) is a miss, and so is
one that is not a regular file (a FIFO would block) or whose stall analyses do not hold
together (:func:`stalls_problem`: columns of one length, indices within their tables). A
result is kept only when it decodes back to itself (the same JSON when encoded again): one
holding something JSON does not carry exactly (numpy arrays, whole numbers in a float
field) is run every time, never served altered. Failures are not kept (the analysis runs again and
fails with the same warning), nor are runs with a lost file or read without the cache.
Writes are atomic (temporary file, then rename), a damaged entry is a miss.
"""

from __future__ import annotations

import base64
import hashlib
import json
import sys
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec
import numpy as np
from profplug.analyzers.core.analysis_spec import AnalysisSpec
from profplug.analyzers.readers.cache import open_entry, reader_fingerprint, write_atomic
from profplug.analyzers.stalls.gaps import CAUSES, Gaps, Spans

if TYPE_CHECKING:
    from profplug.analyzers.stalls.rank import RankResult, StallOptions

MISS = object()  # what ``get`` returns for a result not in the cache
_NONE = "none"  # the type of a cached None (the analysis had nothing to add)


@cache
def analyzer_fingerprint() -> str:
    """A hash of the source of every module of the analyzer, and of the versions of Python,
    numpy and msgspec (computed once)."""
    here = Path(__file__).resolve().parent
    h = hashlib.sha256(reader_fingerprint().encode())
    h.update(f"{sys.version} {np.__version__} {msgspec.__version__}".encode())
    for f in sorted(here.rglob("*.py")):
        h.update(str(f.relative_to(here)).encode())
        h.update(f.read_bytes())
    return h.hexdigest()[:16]


@cache
def _result_types() -> dict[str, type]:
    """The run-level result classes by their ``key``, imported when first needed."""
    from profplug.analyzers.crossrank.result import CrossRankResult
    from profplug.analyzers.stalls.hostonly import HostOnlyResult
    from profplug.analyzers.whatif.result import WhatIfResult

    return {t.key: t for t in (WhatIfResult, CrossRankResult, HostOnlyResult)}


def _enc(o: Any) -> Any:
    if isinstance(o, np.ndarray):
        a = np.ascontiguousarray(o)
        return {"dtype": a.dtype.str, "shape": list(a.shape),
                "data": base64.b64encode(a.tobytes()).decode()}
    if isinstance(o, np.generic):
        return o.item()
    raise NotImplementedError(type(o))


def _dec(t: type, obj: Any) -> Any:
    if t is np.ndarray and isinstance(obj, dict):
        return np.frombuffer(base64.b64decode(obj["data"]), dtype=np.dtype(obj["dtype"])
                             ).reshape(obj["shape"]).copy()
    return obj  # an ``object`` field: as decoded (the round trip checks it)


_ENC = msgspec.json.Encoder(enc_hook=_enc)


@cache
def _stalls_decoder() -> msgspec.json.Decoder[list[RankResult]]:
    from profplug.analyzers.stalls.rank import RankResult

    return msgspec.json.Decoder(list[RankResult], dec_hook=_dec)


def stalls_entry(cache_dir: str | Path, file_key: str, options: StallOptions) -> Path:
    """Where the stall analyses of the ranks of the file with entry key ``file_key`` live."""
    key = hashlib.sha256(json.dumps({"file": file_key, "analyzer": analyzer_fingerprint(),
                                     "options": repr(options)}).encode()).hexdigest()[:32]
    return Path(cache_dir) / f"ranks-{key}.json"


def _key_of(entry: Path) -> bytes:
    """The key an entry's name says it holds (``ranks-<key>.json``, ``run-<key>.json``)."""
    return entry.name.rpartition("-")[2].removesuffix(".json").encode()


def load_stalls(entry: Path) -> list[RankResult] | None:
    """The stall analyses kept in ``entry``; None when missing, damaged, not a regular
    file, of another key than its name's, or not holding together (a miss)."""
    data = open_entry(entry)
    if data is None:
        return None
    key, _, value = data.partition(b"\n")
    if key != _key_of(entry):
        return None
    try:
        got = _stalls_decoder().decode(value)
    except Exception:  # damaged: a miss
        return None
    return None if any(stalls_problem(s) for s in got) else got


def _columns(*arrays: object) -> bool:
    """1-D integer arrays of one length."""
    cols = [a for a in arrays if isinstance(a, np.ndarray) and a.ndim == 1
            and a.dtype.kind in "iu"]
    return len(cols) == len(arrays) and len({a.size for a in cols}) <= 1


def stalls_problem(s: RankResult) -> str | None:
    """Why ``s`` (decoded from an entry) is not a stall analysis the analyzer could have
    made, None when it is: its gaps, spans and steps columns 1-D integers of one length per
    table, gap causes within ``CAUSES``, charged calls within the sync calls."""
    g = s.gaps
    if not isinstance(g, Gaps) or not _columns(g.start_ns, g.end_ns, g.device, g.cause, g.call):
        return "gaps: columns of unequal lengths or types"
    if not isinstance(s.comm, Spans) or not _columns(s.comm.start_ns, s.comm.end_ns,
                                                     s.comm.device):
        return "comm spans: columns of unequal lengths or types"
    if not _columns(s.step_starts_ns, s.step_ends_ns, s.step_last_ns):
        return "step columns of unequal lengths or types"
    if not _columns(s.call_row) or not len(s.call_api) == len(s.call_site) == s.call_row.size:
        return "sync calls of unequal lengths"
    if g.cause.size and (int(g.cause.min()) < 0 or int(g.cause.max()) >= len(CAUSES)):
        return "gap causes outside CAUSES"
    if g.call.size and (int(g.call.min()) < -1 or int(g.call.max()) >= s.call_row.size):
        return "charged calls outside the sync calls"
    return None


def save_stalls(entry: Path, stalls: list[RankResult]) -> None:
    """Keep ``stalls`` when they decode back to themselves (the same JSON encoded again)."""
    try:
        data = _ENC.encode(stalls)
        if _ENC.encode(_stalls_decoder().decode(data)) != data:
            return
    except Exception:  # a field msgspec cannot carry: never kept
        return
    body = _key_of(entry) + b"\n" + data
    write_atomic(entry, lambda fh: fh.write(body), ".json")


class ResultCache:
    """Run-level results of one run, in ``cache_dir``, for the files with ``file_keys``."""

    def __init__(self, cache_dir: str | Path, file_keys: list[str], options: object) -> None:
        self.dir = Path(cache_dir)
        self.base = json.dumps({"files": file_keys, "analyzer": analyzer_fingerprint(),
                                "options": repr(options)})

    def _entry(self, token: str) -> Path:
        key = hashlib.sha256(f"{self.base}\n{token}".encode()).hexdigest()[:32]
        return self.dir / f"run-{key}.json"

    def get(self, analysis: AnalysisSpec) -> Any:
        """The cached result of ``analysis`` (None included), or ``MISS``."""
        token = analysis.cache_key
        if token is None:
            return MISS
        entry = self._entry(token)
        data = open_entry(entry)
        if data is None:
            return MISS
        try:
            head, _, value = data.partition(b"\n")
            key, _, kind = head.partition(b" ")
            if key != _key_of(entry):  # another entry copied under this name
                return MISS
            if kind.decode() == _NONE:
                return None
            return msgspec.json.decode(value, type=_result_types()[kind.decode()])
        except Exception:  # missing, damaged, of an unknown type: a miss
            return MISS

    def put(self, analysis: AnalysisSpec, result: Any) -> None:
        """Keep ``result`` when ``analysis`` has a ``cache_key`` and the result decodes back
        to itself; a folder that cannot be written costs only the time."""
        token = analysis.cache_key
        if token is None:
            return
        kind = _NONE if result is None else getattr(result, "key", None)
        types = _result_types()
        if kind != _NONE and (kind not in types or type(result) is not types[kind]):
            return
        try:
            value = b"null" if result is None else msgspec.json.encode(result)
            if result is not None and msgspec.json.encode(
                    msgspec.json.decode(value, type=types[kind])) != value:
                return  # something JSON does not carry exactly: never served altered
        except Exception:  # a field msgspec cannot carry (a numpy array)
            return
        entry = self._entry(token)
        data = _key_of(entry) + f" {kind}\n".encode() + value
        write_atomic(entry, lambda fh: fh.write(data), ".json")
