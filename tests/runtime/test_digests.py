"""``profplug.digest``: its definition, determinism, step attribution, the Megatron
broadcast hook, and the status record (CPU)."""

from __future__ import annotations

import json
import zlib

import pytest
import torch

import profplug
import profplug.steps as steps
from profplug import digests
from profplug.config import Config


@pytest.fixture(autouse=True)
def fresh():
    steps._reset()
    yield
    digests.disable()
    steps._reset()


def one(t: torch.Tensor) -> str:
    """The digest of step 0 holding only ``t``."""
    digests.enable(1)
    steps._reset()
    profplug.step()
    profplug.digest(t)
    return digests.summary()["steps"][0]


def test_off_by_default_and_then_a_no_op() -> None:
    assert not digests.enabled()
    profplug.step()
    profplug.digest(torch.ones(3))
    assert digests.summary() is None


def test_the_documented_definition() -> None:
    words = [1, 2, -3]
    mask = (1 << 64) - 1
    h = sum((((i + 1) * digests.GOLDEN & mask) | 1) * x for i, x in enumerate(words)) & mask
    salt = zlib.crc32(b"torch.int32:[3]")
    want = (digests.BASIS * digests.PRIME + h + salt) & mask
    assert one(torch.tensor(words, dtype=torch.int32)) == f"{want:016x}"


def test_eight_byte_words_are_read_as_they_are() -> None:
    mask = (1 << 64) - 1
    words = [5, -7]
    h = sum((((i + 1) * digests.GOLDEN & mask) | 1) * x for i, x in enumerate(words)) & mask
    want = (digests.BASIS * digests.PRIME + h + zlib.crc32(b"torch.int64:[2]")) & mask
    assert one(torch.tensor(words)) == f"{want:016x}"


def test_the_same_bytes_at_any_offset_give_the_same_digest() -> None:
    base = torch.arange(20, dtype=torch.int16)
    for start in (1, 2, 3, 4):  # 8 bytes starting 2, 4, 6, 8 bytes into the storage
        assert one(base[start:start + 4]) == one(base[start:start + 4].clone())


def test_same_bytes_same_digest_any_change_another() -> None:
    x = torch.randn(4, 33)
    assert one(x) == one(x.clone())
    for i in (0, 7, 131):
        y = x.clone()
        y.view(-1)[i] = torch.nextafter(y.view(-1)[i], torch.tensor(1e9))  # one ulp
        assert one(y) != one(x)
    swapped = x.clone()
    swapped[0, 0], swapped[0, 1] = x[0, 1], x[0, 0]
    assert one(swapped) != one(x)  # position matters


def test_dtype_and_shape_are_part_of_the_digest() -> None:
    x = torch.arange(8, dtype=torch.int32)
    assert one(x) != one(x.view(2, 4))
    assert one(x) != one(x.view(torch.float32))


@pytest.mark.parametrize("make", [
    lambda: torch.randn(5, 3, dtype=torch.bfloat16),
    lambda: torch.randn(3, dtype=torch.float16),  # 6 bytes: not whole 32-bit words
    lambda: torch.randint(0, 9, (4,)),
    lambda: torch.tensor([True, False, True]),
    lambda: torch.randn(2, dtype=torch.complex64),
    lambda: torch.tensor(3.5),
    lambda: torch.zeros(0),
    lambda: torch.randn(6, 4, requires_grad=True),
])
def test_dtypes_and_layouts(make) -> None:
    torch.manual_seed(0)
    t = make()
    assert one(t) == one(t.detach().clone())
    if t.dim() == 2:  # a non-contiguous view digests as its contiguous copy
        assert one(t.t()) == one(t.t().contiguous())
        assert one(t[:, 1:]) == one(t[:, 1:].contiguous())


def test_inside_and_outside_inference_mode() -> None:
    digests.enable(2)
    profplug.step()
    with torch.inference_mode():
        profplug.digest(torch.ones(4))  # buffers are made here...
    profplug.digest(torch.ones(4))  # ...and written here
    profplug.step()
    with torch.inference_mode():
        profplug.digest(torch.ones(4))
    assert digests.summary()["calls"] == 3


def test_calls_belong_to_the_last_begun_step() -> None:
    digests.enable(3)
    profplug.digest(torch.ones(1))  # before any step: outside
    with profplug.step():
        profplug.digest(torch.ones(1))
    profplug.digest(torch.zeros(1))  # after step 0 ended, before step 1: step 0
    for _ in range(4):  # steps 1..4; 3 and 4 are past the limit
        with profplug.step():
            profplug.digest(torch.ones(1))
    s = digests.summary()
    assert (s["calls"], s["outside"], s["limit"]) == (4, 3, 3)
    assert s["steps"][1] == s["steps"][2] != s["steps"][0]
    assert s["digest"] is not None
    with pytest.raises(TypeError):
        profplug.digest([1, 2])


def test_a_restarted_step_count_forgets_the_digests() -> None:
    digests.enable(2)
    profplug.step()
    profplug.digest(torch.ones(1))
    digests.reset()
    assert digests.summary()["calls"] == 0 and digests.summary()["digest"] is None


def test_from_a_signal_nothing_is_read() -> None:
    digests.enable(1)
    profplug.step()
    profplug.digest(torch.ones(1))
    s = digests.summary(read=False)
    assert s["steps"] is None and s["calls"] == 1 and "signal" in s["error"]


def test_megatrons_broadcast_result_is_digested(monkeypatch) -> None:
    """Megatron's declaration: its broadcast's result is the step's output, its sends are not."""
    import types

    from profplug import p2p, sites
    from profplug.libraries import MEGATRON

    tokens = torch.tensor([5, 7])
    monkeypatch.setattr(p2p, "broadcast_from_last_pipeline_stage", lambda *a, **k: tokens)
    monkeypatch.setattr(p2p, "send_to_next_pipeline_rank", lambda *a, **k: tokens)

    def original(size, dtype, tensor=None, pp_group=None):
        raise AssertionError("the wrapper calls profplug.p2p")

    fake = types.ModuleType("fake_mcu")
    fake.send_to_next_pipeline_rank = original
    fake.broadcast_from_last_pipeline_stage = original
    by_name = {s.target.rpartition(":")[2]: s for s in MEGATRON.sites}
    states = [sites.SiteState(by_name[n]) for n in ("broadcast_from_last_pipeline_stage",
                                                     "send_to_next_pipeline_rank")]
    monkeypatch.setattr(sites, "_states", {s.site.target: s for s in states})
    for state in states:
        sites.install(state, fake)
    digests.enable(1)
    profplug.step()
    assert fake.broadcast_from_last_pipeline_stage([2], torch.int64) is tokens
    assert digests.summary()["steps"][0] == one(tokens)
    fake.send_to_next_pipeline_rank(tokens)
    assert digests.summary()["calls"] == 1  # only the broadcast's result is an output
    assert [s.calls for s in states] == [1, 1]
    sites.unpatch()
    assert fake.send_to_next_pipeline_rank is original


def _session(tmp_path, monkeypatch, **kw):
    from profplug.session.core import Session

    monkeypatch.delenv("RANK", raising=False)
    s = Session(Config(out=str(tmp_path), trace="none", digest=True, **kw))
    steps.add_listener(s.on_step_begin, s.on_step_end, s.on_switch)
    return s


def _status_digest(tmp_path, s) -> dict:
    try:
        s.flush()
    finally:
        steps.remove_listener(s.on_step_begin, s.on_step_end, s.on_switch)
    return json.loads((tmp_path / "status" / "rank0.json").read_text())["digest"]


def test_the_session_turns_digests_on_and_writes_them(tmp_path, monkeypatch) -> None:
    s = _session(tmp_path, monkeypatch, skip=1, steps=2)
    assert digests.enabled()
    for i in range(5):
        with profplug.step():
            profplug.digest(torch.full((2,), float(i)))
    d = _status_digest(tmp_path, s)
    assert d["limit"] == 3 + digests.AFTER_WINDOW and d["window"] == [1, 3]
    assert (d["calls"], d["in_window"], d["outside"]) == (3, 2, 0)
    assert d["steps"][1:3] == [None, None] and None not in (d["steps"][0], *d["steps"][3:])


def test_only_steps_outside_the_timed_window_are_digested(tmp_path, monkeypatch) -> None:
    """The timed steps launch no digest kernel: the warm-up steps and the steps after the
    window are digested; the list of steps ends at the last digested one."""
    s = _session(tmp_path, monkeypatch, skip=2, steps=3, step_timing="host")
    launched: list[int] = []
    real_sum = torch.sum

    def counting_sum(*a, **k):
        launched.append(steps.count() - 1)
        return real_sum(*a, **k)

    monkeypatch.setattr(torch, "sum", counting_sum)
    for i in range(7):
        with profplug.step():
            profplug.digest(torch.full((3,), float(i)))
    monkeypatch.setattr(torch, "sum", real_sum)
    d = _status_digest(tmp_path, s)
    assert launched == [0, 1, 5, 6]
    assert (d["calls"], d["in_window"], d["window"]) == (4, 3, [2, 5])
    assert [x is None for x in d["steps"]] == [False, False, True, True, True, False, False]


def test_a_job_that_stops_with_the_window_is_checked_on_its_warm_up_steps(
        tmp_path, monkeypatch) -> None:
    s = _session(tmp_path, monkeypatch, skip=2, steps=3)
    for i in range(5):
        with profplug.step():
            profplug.digest(torch.full((3,), float(i)))
    d = _status_digest(tmp_path, s)
    assert d["calls"] == 2 and d["in_window"] == 3 and len(d["steps"]) == 2


def test_a_digest_in_the_window_is_only_a_step_comparison() -> None:
    """In a timed step a call returns before anything else, even its argument check."""
    digests.enable(10, window=(0, 5))
    profplug.step()
    profplug.digest("not a tensor")
    s = digests.summary()
    assert (s["calls"], s["in_window"], s["steps"], s["digest"]) == (0, 1, [], None)
    with pytest.raises(ValueError):
        digests.enable(3, window=(2, 1))
