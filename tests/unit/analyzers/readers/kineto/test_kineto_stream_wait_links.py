"""torch 2.11 Kineto: stream waits with no record correlation are linked to their record call
(``waitlinks.link_stream_waits``); the record's stream is not in the trace and stays -1."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from profplug.analyzers.core.timeline import SYNC_STREAM_WAIT_EVENT
from profplug.analyzers.readers.kineto.reader import read_kineto
from synth import KinetoTrace

SHARED = Path("/work/shared/traces/mcore_pp2_client/device/kineto/rank0.json.gz")


def _wait(t: KinetoTrace, at: float, event_id: int, stream: int = 18, tid: int = 1) -> int:
    corr = t.runtime("cudaStreamWaitEvent", at, 1.0, tid=tid)
    t.cuda_sync("Stream Wait Event", at + 0.5, 0.5, stream=stream, corr=corr,
                wait_on_stream=-1, wait_corr=-1)
    t.events[-1]["args"]["wait_on_cuda_event_id"] = event_id
    return corr


def _links(path: Path) -> dict[int, int]:
    tl = read_kineto(path)
    w = np.nonzero(tl.gsync_kind == SYNC_STREAM_WAIT_EVENT)[0]
    assert (tl.gsync_wait_stream[w] == -1).all()  # the record's stream is not in the trace
    return dict(zip(tl.gsync_corr[w].tolist(), tl.gsync_wait_corr[w].tolist(), strict=True))


def test_wait_links_to_last_record_before_it_not_later_one(tmp_path: Path) -> None:
    t = KinetoTrace()
    t.launch(0, 10, 5)
    r1 = t.runtime("cudaEventRecord", 2, 1.0)
    w1 = _wait(t, 4, event_id=24)
    t.launch(6, 20, 5, stream=18)
    r2 = t.runtime("cudaEventRecordWithFlags", 8, 1.0)  # event 24 again, after the wait
    w2 = _wait(t, 10, event_id=24)
    links = _links(t.write(tmp_path / "rank0.json"))
    assert links[w1] == r1
    assert links[w2] == r2


def test_record_on_another_thread_is_not_taken(tmp_path: Path) -> None:
    t = KinetoTrace()
    t.runtime("cudaEventRecord", 2, 1.0, tid=2)
    w = _wait(t, 4, event_id=24, tid=1)
    assert _links(t.write(tmp_path / "rank0.json"))[w] == -1


def test_wait_whose_event_has_no_record_stays_unlinked(tmp_path: Path) -> None:
    t = KinetoTrace()
    r = t.runtime("cudaEventRecord", 2, 1.0)
    w1 = _wait(t, 4, event_id=24)
    w2 = _wait(t, 6, event_id=25)  # nearest record is event 24's: not 25's
    w0 = KinetoTrace()
    first = _wait(w0, 1, event_id=7)  # no record call at all before it
    links = _links(t.write(tmp_path / "rank0.json"))
    assert links[w1] == r
    assert links[w2] == -1
    assert _links(w0.write(tmp_path / "other_rank0.json"))[first] == -1


def test_known_record_corr_is_kept(tmp_path: Path) -> None:
    t = KinetoTrace()
    t.runtime("cudaEventRecord", 2, 1.0)
    corr = t.runtime("cudaStreamWaitEvent", 4, 1.0)
    t.cuda_sync("Stream Wait Event", 4.5, 0.5, stream=18, corr=corr, wait_on_stream=7,
                wait_corr=55)
    tl = read_kineto(t.write(tmp_path / "rank0.json"))
    assert tl.gsync_wait_corr.tolist() == [55]
    assert tl.gsync_wait_stream.tolist() == [7]


@pytest.mark.skipif(not SHARED.exists(), reason="shared mcore_pp2_client trace not here")
def test_shared_trace_every_wait_finds_its_record_call() -> None:
    links = _links(SHARED)
    assert len(links) == 119
    assert sum(v >= 0 for v in links.values()) == 119  # was 0: corr -1 in every wait
