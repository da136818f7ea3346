"""Build a large, realistic Kineto trace (one file per rank) for the analyzer benchmark.

Source, in order of preference:

1. real traces: the rank files of ``sample_traces/pp2_megatron_kineto/device/kineto`` (else
   the first ``sample_traces/**/kineto/*.json.gz`` run); rank r repeats real rank r's whole
   window as it is;
2. else (or ``--synthetic``) one step of a torch.profiler CPU run of a small pipeline-stage
   decode loop (record_shapes on, so ``cpu_op`` events carry ``Input Dims`` etc.), enriched
   to look like a GPU decode step: every compute op launches a kernel (``cudaLaunchKernel``
   with correlation, ``kernel`` on stream 7 with the usual args, ``ac2g`` flow pair), the
   recv/send ranges hold a NCCL SendRecv kernel on stream 20, ``cudaStreamWaitEvent`` and a
   device-wide ``cudaDeviceSynchronize`` with its ``cuda_sync`` records, and annotations get
   their ``gpu_user_annotation`` twins.

The block is written again and again with shifted timestamps (us, 3 decimals, relative to
``baseTimeNanoseconds`` like recent torch) and shifted correlation / flow / External ids, in
Kineto's own JSON layout, until the file reaches the requested size.

    python benchmarks/make_big_trace.py OUTDIR --mb 300 --ranks 2
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BASE_NS = 1_790_000_000_000_000_000
KERNELS = {  # cpu op -> (kernel name, duration ns)
    "aten::addmm": ("ampere_sgemm_64x32_sliced1x4_tn", 11_400),
    "aten::mm": ("ampere_sgemm_64x32_sliced1x4_tn", 11_400),
    "aten::gelu": ("void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernel"
                   "Impl(at::TensorIteratorBase&, at::native::GeluType)::{lambda()#2}::operator()"
                   "() const::{lambda()#1}::operator()() const::{lambda(float)#1}, at::detail::"
                   "Array<char*, 2> >(int, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase"
                   "&, at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#1}::"
                   "operator()() const::{lambda(float)#1}, at::detail::Array<char*, 2>)", 2_300),
    "aten::copy_": ("void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl_"
                    "nocast<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::"
                    "{lambda()#3}::operator()() const::{lambda()#7}::operator()() const::"
                    "{lambda(float)#1}>(at::TensorIteratorBase&, at::native::direct_copy_kernel"
                    "_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::"
                    "{lambda()#7}::operator()() const::{lambda(float)#1} const&)::{lambda(int)#1}"
                    ">(int, at::native::gpu_kernel_impl_nocast<...>::{lambda(int)#1})", 1_900),
    "aten::mul": ("void at::native::vectorized_elementwise_kernel<4, at::native::AUnaryFunctor"
                  "<float, float, float, at::native::binary_internal::MulFunctor<float> >, "
                  "at::detail::Array<char*, 2> >(int, at::native::AUnaryFunctor<float, float, "
                  "float, at::native::binary_internal::MulFunctor<float> >, at::detail::Array"
                  "<char*, 2>)", 1_700),
}
NCCL_KERNEL = "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)"
P2P_RANGES = ("recv_from_prev_pipeline_rank_", "send_to_next_pipeline_rank")
COMPUTE_STREAM, NCCL_STREAM = 7, 20

CAPTURE = r"""
import sys, torch, torch.nn as nn
from torch.profiler import profile, ProfilerActivity, schedule, record_function
torch.manual_seed(0)
layers = nn.Sequential(*[nn.Sequential(nn.Linear(512, 512), nn.GELU()) for _ in range(8)])
x = torch.randn(8, 512)
def done(p): p.export_chrome_trace(sys.argv[1])
with profile(activities=[ProfilerActivity.CPU], record_shapes=True,
             schedule=schedule(wait=0, warmup=2, active=4), on_trace_ready=done) as p:
    for _ in range(6):
        with record_function("recv_from_prev_pipeline_rank_"):
            y = x.clone()
        with torch.no_grad():
            y = layers(y)
        with record_function("send_to_next_pipeline_rank"):
            x = y.contiguous() * 1.0
        p.step()
"""


# ---------------------------------------------------------------------------- source
PREFERRED = ("pp2_megatron_kineto/device", "pp2_infer_kineto/device")


def real_traces() -> list[Path]:
    """Rank files of a real Kineto run in sample_traces/ (Megatron PP=2 first), or []."""
    for name in PREFERRED:
        found = sorted((ROOT / "sample_traces" / name / "kineto").glob("rank*.json.gz"))
        if found:
            return found
    found = sorted(ROOT.glob("sample_traces/**/kineto/*.json.gz"))
    return sorted(found[0].parent.glob("*.json.gz")) if found else []


def whole_window(trace: dict[str, Any]) -> tuple[list[dict[str, Any]], int, float]:
    """All timed events of a real trace (ns, relative to its first), its span, first ts (us)."""
    ev = [e for e in trace["traceEvents"] if e.get("ph") in ("X", "s", "f")
          and e.get("cat") != "Trace" and isinstance(e.get("ts"), int | float)]
    t0 = min(e["ts"] for e in ev)
    t1 = max(e["ts"] + e.get("dur", 0) for e in ev)
    out = []
    for e in ev:
        e = dict(e)
        e["ts_ns"] = round((e["ts"] - t0) * 1000)
        e["dur_ns"] = round(e.get("dur", 0) * 1000)
        out.append(e)
    out.sort(key=lambda e: (e["ts_ns"], -e["dur_ns"]))
    return out, round((t1 - t0) * 1000), t0


def capture_cpu_trace(out: Path) -> Path:
    """A torch.profiler CPU trace of a small decode loop (needs torch)."""
    subprocess.run([sys.executable, "-c", CAPTURE, str(out)], check=True,
                   stderr=subprocess.DEVNULL)
    return out


def load(path: Path) -> dict[str, Any]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as fh:
        return json.load(fh)


def one_step(trace: dict[str, Any]) -> tuple[list[dict[str, Any]], int]:
    """Events of the last complete ProfilerStep (times made ns, relative to its start)."""
    ev = [e for e in trace["traceEvents"] if e.get("ph") == "X"]
    steps = sorted((e for e in ev if str(e.get("name", "")).startswith("ProfilerStep#")),
                   key=lambda e: e["ts"])
    if len(steps) < 2:
        raise SystemExit("source trace needs at least two ProfilerStep# ranges")
    s = steps[-2]
    t0, t1 = s["ts"], steps[-1]["ts"]
    out = []
    for e in ev:
        if t0 <= e["ts"] < t1 and e.get("cat") != "Trace":
            e = dict(e)
            e["ts_ns"] = round((e["ts"] - t0) * 1000)
            e["dur_ns"] = round(e.get("dur", 0) * 1000)
            out.append(e)
    out.sort(key=lambda e: (e["ts_ns"], -e["dur_ns"]))
    return out, round((t1 - t0) * 1000)


# ---------------------------------------------------------------------------- enrich
class Enricher:
    """Adds the GPU side a CUDA run would have recorded to one CPU-only step."""

    def __init__(self, pid: int, tid: int) -> None:
        self.pid, self.tid = pid, tid
        self.out: list[dict[str, Any]] = []
        self.corr = 0
        self.stream_free = {COMPUTE_STREAM: 0, NCCL_STREAM: 0}

    def add(self, **e: Any) -> dict[str, Any]:
        self.out.append(e)
        return e

    def launch(self, at: int, ext: int, kname: str, kdur: int, stream: int,
               grid: list[int], block: list[int]) -> int:
        self.corr += 1
        c = self.corr
        api_dur = 3_900
        self.add(ph="X", cat="cuda_runtime", name="cudaLaunchKernel", pid=self.pid, tid=self.tid,
                 ts_ns=at, dur_ns=api_dur, args={"External id": ext, "cbid": 211,
                                                 "correlation": c})
        self.add(ph="s", id=c, pid=self.pid, tid=self.tid, ts_ns=at, cat="ac2g", name="ac2g")
        start = max(at + 2_500, self.stream_free[stream])
        self.stream_free[stream] = start + kdur
        self.add(ph="X", cat="kernel", name=kname, pid=0, tid=stream, ts_ns=start, dur_ns=kdur,
                 args={"External id": ext, "queued": 0, "device": 0, "context": 1,
                       "stream": stream, "correlation": c, "registers per thread": 32,
                       "shared memory": 0, "blocks per SM": 0.969697, "warps per SM": 3.878788,
                       "grid": grid, "block": block, "est. achieved occupancy %": 6})
        self.add(ph="f", id=c, pid=0, tid=stream, ts_ns=start, cat="ac2g", name="ac2g", bp="e")
        return start + kdur

    def runtime(self, name: str, at: int, dur: int, ext: int, cbid: int) -> int:
        self.corr += 1
        self.add(ph="X", cat="cuda_runtime", name=name, pid=self.pid, tid=self.tid, ts_ns=at,
                 dur_ns=dur, args={"External id": ext, "cbid": cbid, "correlation": self.corr})
        return self.corr

    def p2p(self, ann: dict[str, Any]) -> None:
        """recv/send range: NCCL kernel, stream wait, device-wide synchronize."""
        a, ext = ann["ts_ns"], ann["args"].get("External id", 0)
        end = a + ann["dur_ns"]
        rec = self.runtime("cudaEventRecord", a + 1_000, 1_800, ext, 135)
        nccl_end = self.launch(a + 3_000, ext, NCCL_KERNEL, max(2_000, ann["dur_ns"] // 3),
                               NCCL_STREAM, [1, 1, 1], [512, 1, 1])
        w = a + 7_500
        wc = self.runtime("cudaStreamWaitEvent", w, 1_500, ext, 146)
        self.add(ph="X", cat="cuda_sync", name="Stream Wait Event", pid=0, tid=COMPUTE_STREAM,
                 ts_ns=max(w, nccl_end), dur_ns=0,
                 args={"cuda_sync_kind": "Stream Wait Event", "device": 0,
                       "stream": COMPUTE_STREAM, "correlation": wc,
                       "wait_on_stream": NCCL_STREAM, "wait_on_cuda_event_record_corr_id": rec})
        s = a + 9_500
        drained = max(self.stream_free.values())
        sync_end = min(max(s + 1_200, drained + 800), end - 300)
        sc = self.runtime("cudaDeviceSynchronize", s, sync_end - s, ext, 165)
        self.add(ph="X", cat="cuda_sync", name="Context Sync", pid=0, tid=-1,
                 ts_ns=sync_end - 400, dur_ns=400,
                 args={"cuda_sync_kind": "Context Sync", "device": 0, "stream": -1,
                       "correlation": sc})

    def run(self, step: list[dict[str, Any]]) -> list[dict[str, Any]]:
        p2p_spans = []
        for e in step:
            e = dict(e, pid=self.pid, tid=self.tid) if e.get("pid") != "Spans" else dict(e)
            inside = any(lo < e["ts_ns"] < hi for lo, hi in p2p_spans)
            if inside:  # the CPU op inside recv/send gives way to the p2p calls
                continue
            self.out.append(e)
            ext = e.get("args", {}).get("External id", 0)
            if e.get("cat") == "user_annotation":
                if e["name"] in P2P_RANGES:
                    p2p_spans.append((e["ts_ns"], e["ts_ns"] + e["dur_ns"]))
                    self.p2p(e)
                self.add(ph="X", cat="gpu_user_annotation", name=e["name"], pid=0,
                         tid=COMPUTE_STREAM, ts_ns=e["ts_ns"] + 3_000, dur_ns=e["dur_ns"],
                         args={"External id": ext})
            elif e.get("cat") == "cpu_op" and e["name"] in KERNELS:
                kname, kdur = KERNELS[e["name"]]
                at = e["ts_ns"] + max(0, e["dur_ns"] - 5_000)
                self.launch(at, ext, kname, kdur, COMPUTE_STREAM, [16, 1, 1], [128, 1, 1])
        self.out.sort(key=lambda e: e["ts_ns"])
        return self.out


# ---------------------------------------------------------------------------- write
def _template(e: dict[str, Any]) -> tuple[str, int, bool, bool]:
    """Kineto-layout text of one event with {t} (ts), {c} (corr), {w} (awaited event-record
    corr), {x} (External id) to fill in."""
    args = e.get("args")
    has_c = e.get("ph") in ("s", "f") or (args is not None and "correlation" in args)
    has_x = args is not None and "External id" in args
    head = {k: v for k, v in e.items() if k in ("ph", "cat", "name", "pid", "tid")}
    parts = [json.dumps(head)[1:-1].replace("{", "{{").replace("}", "}}")]
    if e.get("ph") in ("s", "f"):
        parts.append('"id": {c}')
    lines = ["  {{", "    " + ", ".join(parts) + ",", '    "ts": {t}']
    if e.get("ph") == "X":
        d = e["dur_ns"]
        lines[-1] += f', "dur": {d // 1000}.{d % 1000:03d}'
    if e.get("bp"):
        lines[-1] += ', "bp": "e"'
    if args is not None:
        a = dict(args)
        if "correlation" in a:
            a["correlation"] = "@C@"
        if "External id" in a:
            a["External id"] = "@X@"
        if "wait_on_cuda_event_record_corr_id" in a:
            a["wait_on_cuda_event_record_corr_id"] = "@W@"
        body = json.dumps(a)[1:-1].replace("{", "{{").replace("}", "}}")
        body = body.replace('"@C@"', "{c}").replace('"@X@"', "{x}").replace('"@W@"', "{w}")
        lines[-1] += ","
        lines += ['    "args": {{', "      " + body, "    }}"]
    lines.append("  }}")
    return "\n".join(lines), e["ts_ns"], has_c, has_x


def _synthetic_header(rank: int, world: int) -> dict[str, Any]:
    return {"schemaVersion": 1, "deviceProperties": [{
        "id": 0, "name": "NVIDIA H200", "totalGlobalMem": 150110011392,
        "computeMajor": 9, "computeMinor": 0, "maxThreadsPerBlock": 1024,
        "maxThreadsPerMultiprocessor": 2048, "regsPerBlock": 65536, "warpSize": 32,
        "sharedMemPerBlock": 49152, "numSms": 132}],
        "distributedInfo": {"backend": "nccl", "rank": rank, "world_size": world,
                            "pg_count": 1, "pg_config": [], "nccl_version": "2.28.3"},
        "record_shapes": 1, "with_stack": 0, "displayTimeUnit": "ms",
        "baseTimeNanoseconds": BASE_NS}


def _ids(e: dict[str, Any]) -> tuple[int, int, int]:
    """(correlation or flow id, awaited event-record corr, External id); 0 when absent."""
    a = e.get("args") or {}
    vals = (a.get("correlation", e.get("id", 0)), a.get("wait_on_cuda_event_record_corr_id", 0),
            a.get("External id", 0))
    return tuple(v if isinstance(v, int) else 0 for v in vals)


def write_rank(path: Path, block: list[dict[str, Any]], period_ns: int,
               header: dict[str, Any], t_first_ns: int, target_bytes: int,
               step_markers: bool = True) -> tuple[int, int]:
    """Write ``block`` again and again (times + ``period_ns``, ids shifted past the block's
    largest) until ``target_bytes``; returns (repeats, events) written.

    ``step_markers=False`` renames ``ProfilerStep#N`` to ``DecodeStep#N`` (same bytes), for
    tools whose cost grows with the number of steps.
    """
    tpls = [_template(e) for e in block]
    if not step_markers:
        tpls = [(t.replace('"ProfilerStep#', '"DecodeStep#'), *rest) for t, *rest in tpls]
    ids = [_ids(e) for e in block]
    n_corr = 1 + max(max(c, w) for c, w, _ in ids)
    n_ext = 1 + max(x for _, _, x in ids)
    written = reps = 0
    with open(path, "w") as fh:
        fh.write("{\n" + json.dumps(header, indent=2)[2:-2] + ',\n  "traceEvents": [\n')
        sep = ""
        while written < target_bytes:
            shift = t_first_ns + reps * period_ns
            cs, xs = reps * n_corr, reps * n_ext
            chunk = []
            for (tpl, t, _, _), (c, w, x) in zip(tpls, ids, strict=True):
                ts = shift + t
                chunk.append(tpl.format(t=f"{ts // 1000}.{ts % 1000:03d}",
                                        c=c + cs if c > 0 else c, w=w + cs if w > 0 else w,
                                        x=x + xs if x > 0 else x))
            text = sep + ",\n".join(chunk)
            sep = ",\n"
            fh.write(text)
            written += len(text)
            reps += 1
        fh.write('\n  ],\n  "traceName": "' + path.name + '"\n}\n')
    return reps, reps * len(block)


def build(outdir: Path, mb_per_rank: float, ranks: int, step_markers: bool = True,
          synthetic: bool = False) -> list[Path]:
    """Write ``ranks`` files of about ``mb_per_rank`` MB each into ``outdir``.

    Source: the real rank traces in sample_traces/ (rank r repeats real rank r's whole
    window), else (or with ``synthetic``) one enriched step of a torch CPU run.
    """
    outdir.mkdir(parents=True, exist_ok=True)
    real = [] if synthetic else real_traces()
    blocks: list[tuple[list[dict[str, Any]], int, dict[str, Any], int]] = []
    if real:
        firsts = []
        for r in range(ranks):
            trace = load(real[r % len(real)])
            block, span, t0 = whole_window(trace)
            header = {k: v for k, v in trace.items() if k not in ("traceEvents", "traceName")}
            if isinstance(header.get("distributedInfo"), dict):
                header["distributedInfo"] = dict(header["distributedInfo"], rank=r)
            firsts.append(t0)
            blocks.append((block, span + 50_000, header, 0))
        # keep the ranks' real relative alignment
        blocks = [(b, p, h, 5_114_000_000_000 + round((t - min(firsts)) * 1000))
                  for (b, p, h, _), t in zip(blocks, firsts, strict=True)]
        src = f"{real[0].parent} (real, whole window repeated)"
    else:
        with tempfile.TemporaryDirectory() as tmp:
            trace = load(capture_cpu_trace(Path(tmp) / "cpu.json"))
        step, period = one_step(trace)
        pid = next(e["pid"] for e in step if isinstance(e.get("pid"), int))
        step = Enricher(pid, pid).run(step)
        blocks = [(step, period + 10_000, _synthetic_header(r, ranks),
                   5_114_000_000_000 + r * 137_000) for r in range(ranks)]
        src = "torch CPU run, one step enriched to a GPU decode step"
    paths = []
    for r, (block, period, header, t_first) in enumerate(blocks):
        p = outdir / f"rank{r}.pt.trace.json"
        reps, n_ev = write_rank(p, block, period, header, t_first, int(mb_per_rank * 1e6),
                                step_markers)
        print(f"{p}: {os.path.getsize(p) / 1e6:.0f} MB, {reps} repeats, {n_ev} events "
              f"(source: {src})", file=sys.stderr)
        paths.append(p)
    return paths


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("outdir", type=Path)
    ap.add_argument("--mb", type=float, default=300.0, help="MB per rank file (uncompressed)")
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--no-step-markers", action="store_true",
                    help="name the steps DecodeStep#N instead of ProfilerStep#N")
    ap.add_argument("--synthetic", action="store_true",
                    help="build from an enriched torch CPU run even if real traces exist")
    a = ap.parse_args()
    build(a.outdir, a.mb, a.ranks, not a.no_step_markers, a.synthetic)


if __name__ == "__main__":
    main()
