"""Fuzz the Kineto reader with mutated traces: a Timeline or a TraceError, nothing else."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from profplug.analyzers.readers.kineto import read_kineto
from profplug.analyzers.stalls import analyze_rank
from synth import mixed_trace

from profplug.errors import TraceError

SEED = json.dumps(mixed_trace().to_dict(), indent=1).encode()

mutation = st.one_of(
    st.tuples(st.just("cut"), st.integers(0, len(SEED))),
    st.tuples(st.just("flip"), st.lists(st.tuples(st.integers(0, len(SEED) - 1),
                                                  st.integers(0, 255)), min_size=1, max_size=8)),
    st.tuples(st.just("insert"), st.tuples(st.integers(0, len(SEED)), st.binary(max_size=16))),
)


def mutate(data: bytes, m: tuple) -> bytes:
    kind, arg = m
    if kind == "cut":
        return data[:arg]
    if kind == "flip":
        b = bytearray(data)
        for pos, val in arg:
            b[pos] = val
        return bytes(b)
    pos, blob = arg
    return data[:pos] + blob + data[pos:]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(m=mutation, gz=st.sampled_from(["plain", "gz", "gz-then-mutate"]))
def test_mutated_traces_never_crash(tmp_path: Path, m: tuple, gz: str) -> None:
    if gz == "gz-then-mutate":
        packed = gzip.compress(SEED)
        if m[0] == "flip":
            data = mutate(packed, ("flip", [(p % len(packed), v) for p, v in m[1]]))
        elif m[0] == "cut":
            data = packed[: m[1] % (len(packed) + 1)]
        else:
            data = mutate(packed, ("insert", (m[1][0] % (len(packed) + 1), m[1][1])))
    else:
        data = mutate(SEED, m)
        if gz == "gz":
            data = gzip.compress(data)
    gz_name = gz != "plain"
    p = tmp_path / ("t.json.gz" if gz_name else "t.json")
    p.write_bytes(data)
    try:
        tl = read_kineto(p)
    except TraceError as exc:
        assert "\n" not in str(exc) and str(p) in str(exc)
        return
    r = analyze_rank(tl)  # whatever was read must also analyze
    for d in r.devices:
        assert abs(sum(d.idle_by_cause_us.values()) - d.gpu.idle_us) < 1e-3
