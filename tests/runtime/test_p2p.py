"""profplug.p2p on real gloo ranks: every policy moves the same bytes as plain send/recv.

Two gloo jobs (2 and 4 ranks), each started once for the module; the tests assert on what
their ranks checked and wrote."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.distributed as dist
from profplug.analyzers.core import ranges

from runtime._dist import run_ranks

SHAPES = [(1,), (3, 5), (2, 7, 4), (64, 33), (1, 1, 1, 9)]
DTYPES = [torch.float32, torch.int64, torch.bfloat16]
POLICIES = ["device", "event", "none"]
STEPS = 12


def _payload(step: int, shape: tuple[int, ...], dtype: torch.dtype, src: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(step * 1000 + src)
    return (torch.randn(shape, generator=g) * 100).to(dtype)


def _ring(rank: int, world: int, step: int, shape, dtype, policy, group=None) -> None:
    """Each stage sends its payload to the next and checks what the previous sent."""
    from profplug import p2p

    granks = dist.get_process_group_ranks(group) if group is not None else list(range(world))
    me = granks.index(rank)
    prev = granks[(me - 1) % len(granks)]
    mine = _payload(step, shape, dtype, rank)
    got = torch.empty(shape, dtype=dtype)
    if policy == "plain":
        ops = [dist.P2POp(dist.isend, mine, granks[(me + 1) % len(granks)]),
               dist.P2POp(dist.irecv, got, prev)]
        for req in dist.batch_isend_irecv(ops):
            req.wait()
    elif me % 2 == 0:  # even stages send first: no deadlock with blocking gloo pairs
        p2p.send_to_next_pipeline_rank(mine, group, sync=policy)
        p2p.recv_from_prev_pipeline_rank_(got, group, sync=policy)
    else:
        p2p.recv_from_prev_pipeline_rank_(got, group, sync=policy)
        p2p.send_to_next_pipeline_rank(mine, group, sync=policy)
    expected = _payload(step, shape, dtype, prev)
    assert torch.equal(got, expected), (policy, step, shape, dtype)


def _all_policies(rank: int, world: int, steps: int) -> dict[str, int]:
    """Every policy and plain send/recv around the ring, then broadcasts; the number of
    tensors checked, per policy."""
    from profplug import p2p

    checked = {}
    for policy in ["plain", *POLICIES]:
        checked[policy] = 0
        for step in range(steps):
            for i, shape in enumerate(SHAPES):
                _ring(rank, world, step, shape, DTYPES[(step + i) % len(DTYPES)], policy)
                checked[policy] += 1
        # broadcast from the last stage: every rank gets the last rank's tensor
        for step in range(steps):
            shape, dtype = SHAPES[step % len(SHAPES)], DTYPES[step % len(DTYPES)]
            src = world - 1
            t = _payload(step, shape, dtype, src) if rank == src else None
            if policy == "plain":
                out = t if t is not None else torch.empty(shape, dtype=dtype)
                dist.broadcast(out, src=src)
            else:
                out = p2p.broadcast_from_last_pipeline_stage(list(shape), dtype, t, sync=policy)
            assert out.dtype == dtype and torch.equal(out, _payload(step, shape, dtype, src))
            checked[policy] += 1
    return checked


def _subgroups(rank: int, world: int) -> dict[str, int]:
    """Two 2-stage pipelines [0, 1] and [2, 3]: neighbours are global ranks of the group.
    The number of tensors checked, per policy."""
    from profplug import p2p

    groups = [dist.new_group([0, 1]), dist.new_group([2, 3])]
    group = groups[rank // 2]
    checked = {}
    for policy in POLICIES:
        checked[policy] = 0
        for step in range(5):
            _ring(rank, world, step, (4, 6), torch.float32, policy, group)
            checked[policy] += 1
        last = 1 if rank < 2 else 3
        t = _payload(9, (5,), torch.float32, last) if rank == last else None
        out = p2p.broadcast_from_last_pipeline_stage([5], torch.float32, t, group, sync=policy)
        assert torch.equal(out, _payload(9, (5,), torch.float32, last))
        checked[policy] += 1
    return checked


def _traced(rank: int, world: int, out_dir: str) -> None:
    import profplug
    from profplug import p2p

    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        for step in range(3):
            with profplug.step():
                for policy in POLICIES:
                    _ring(rank, world, step, (8,), torch.float32, policy)
                src = world - 1
                t = torch.ones(4) if rank == src else None
                p2p.broadcast_from_last_pipeline_stage([4], torch.float32, t, sync="event")
    path = os.path.join(out_dir, f"rank{rank}.json.gz")
    prof.export_chrome_trace(path)


def _job(rank: int, world: int, out_dir: str) -> None:
    """One gloo job shared by the tests below: every policy against plain send/recv, then
    (4 ranks) two pipelines in subgroups, or (2 ranks) the ranges in a profiler trace. Each
    rank writes what it checked to ``rank<R>.json``; a failed check fails the job."""
    done: dict[str, Any] = {"all_policies": _all_policies(rank, world, STEPS)}
    if world == 4:
        done["subgroups"] = _subgroups(rank, world)
    else:
        _traced(rank, world, out_dir)
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump(done, f)


Job = tuple[Path, list[dict[str, Any]]]  # its directory, what each rank checked


def _run_job(world: int, tmp_path_factory: pytest.TempPathFactory) -> Job:
    out = tmp_path_factory.mktemp(f"p2p{world}")
    run_ranks(world, _job, str(out))
    return out, [json.loads((out / f"rank{r}.json").read_text()) for r in range(world)]


@pytest.fixture(scope="module")
def job2(tmp_path_factory: pytest.TempPathFactory) -> Job:
    return _run_job(2, tmp_path_factory)


@pytest.fixture(scope="module")
def job4(tmp_path_factory: pytest.TempPathFactory) -> Job:
    return _run_job(4, tmp_path_factory)


@pytest.mark.slow
@pytest.mark.parametrize("world", [2, 4])
def test_every_policy_matches_plain_send_recv(world: int, request: pytest.FixtureRequest
                                              ) -> None:
    _, done = request.getfixturevalue(f"job{world}")
    # per policy and rank: 5 shapes x 12 steps around the ring, then 12 broadcasts
    want = {p: len(SHAPES) * STEPS + STEPS for p in ["plain", *POLICIES]}
    assert [d["all_policies"] for d in done] == [want] * world


@pytest.mark.slow
def test_pp_group_neighbours_are_group_ranks(job4: Job) -> None:
    # per policy and rank: 5 steps around its own pipeline, then 1 broadcast from its last
    assert [d["subgroups"] for d in job4[1]] == [{p: 6 for p in POLICIES}] * 4


@pytest.mark.slow
def test_ranges_appear_in_a_torch_profiler_trace(job2: Job) -> None:
    tmp_path = job2[0]
    for rank in range(2):
        with gzip.open(tmp_path / f"rank{rank}.json.gz", "rt") as f:
            events = json.load(f)["traceEvents"]
        raw = [e["name"] for e in events if e.get("cat") == "user_annotation"]
        names = [ranges.without_payload(n) for n in raw]
        # the whole-op ranges carry their peer (global rank) in the name
        other = 1 - rank
        assert raw.count(ranges.p2p_range(ranges.SEND, other)) == 9
        assert raw.count(ranges.p2p_range(ranges.RECV, other)) == 9
        assert raw.count(ranges.broadcast_range(1, (0, 1))) == 3
        for name in (ranges.SEND, ranges.RECV, ranges.BROADCAST, ranges.POST, ranges.WAIT,
                     ranges.SYNC_DEVICE, ranges.SYNC_EVENT, ranges.STEP):
            assert name in names, name
        assert names.count(ranges.STEP) == 3
        # per step: 3 policies x (send + recv), device policy -> 2 sync.device ranges
        assert names.count(ranges.SEND) == 9 and names.count(ranges.RECV) == 9
        assert names.count(ranges.SYNC_DEVICE) == 6
        assert names.count(ranges.SYNC_EVENT) == 6 + 3  # send/recv + broadcast
        assert names.count(ranges.WAIT) == 18 + 3
