#!/usr/bin/env bash
# One device call on a single H200 (the device tool's nvidia-h200): the GPU proofs of
# profplug run's Megatron auto-steps and Nsight exit (issue 12), profplug ab and its timing
# overhead (issue 14), and ab's unprofiled ground truth for the what-if grid (issue 16).
# Needs .whl (nvtx, msgspec, megatron-core wheels for cp312) and .devlibs (libdw for nsys)
# carried along. Sections (SECTIONS, a space-separated list; default: the first five) run in
# the order given under one deadline (BUDGET_S seconds from the start); each logs and carries
# on on failure. Results: $OUT/log.txt, $OUT/session.tgz.
#   SECTIONS="timing2 hostmodes" BUDGET_S=400 bash scripts/gpu_session.sh
#   SECTIONS=ab26 BUDGET_S=480 bash scripts/gpu_session.sh     # issue 26 (ab round 2)
set -u
BUDGET_S=${BUDGET_S:-540}
W=/tmp/session
. "$(dirname "$0")/gpu_common.sh"
TR1="python3 -m torch.distributed.run --nproc-per-node 1"
DL="python3 examples/decode_loop.py"
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  python3 -c "import torch;print('torch',torch.__version__,'cuda',torch.version.cuda,'nccl',torch.cuda.nccl.version(),'gpus',torch.cuda.device_count())"
  $NSYS --version; nproc; lscpu; numactl -H 2>/dev/null; } > "$W/machine.txt" 2>&1
cat "$W/machine.txt" >> "$LOG"

# 1. issue 12: a Megatron-Core script that never imports profplug, under profplug run:
#    Kineto and Nsight, device and event; steps come from Megatron's run_one_forward_step.
s_mcore() {
  for tr in kineto nsys; do
    for s in device event; do
      run "mcore_${tr}_$s" 60 $PP run -o "$W/mcore_run/$tr/$s" --trace $tr --nsys "$NSYS" \
        --sync $s --skip 10 --steps 20 -- $TR1 examples/megatron_gpt_infer.py --steps 40
    done
  done
}

# 2. issue 14: ab on the decode loop (one GPU, 2 local stages, launch-bound hidden 1024),
#    with the what-if of a traced device run of the same job drawn against it.
s_dl_ab() {
  DLS="--hidden 1024 --layers 8 --batch 8 --stages 2"
  run dl_traced 40 $PP run -o "$W/dl/traced_device" --sync device --skip 20 --steps 30 \
    --no-report -- $DL $DLS --steps 60
  run dl_ab 150 $PP ab -o "$W/dl/ab" --policies device,event,none --rounds 5 --skip 20 \
    --steps 100 --whatif "$W/dl/traced_device" --html "$W/dl/ab.html" -- $DL $DLS --steps 125
}

# 3. issue 14: the step timer's own overhead (target <= 1% of the step), both policies.
s_timing() {
  for s in event device; do
    run "bench_timing_$s" 60 python3 benchmarks/bench_ab_timing.py --sync $s --rounds 30 \
      --json "$W/bench_timing_$s.json"
  done
}

# 4. issue 14: ab on Megatron-Core at PP=1 (an A/A check: no send/recv at world size 1),
#    digests taken automatically from broadcast_from_last_pipeline_stage.
s_mcore_ab() {
  run mcore_ab 140 $PP ab -o "$W/mcore_ab" --policies device,event --rounds 5 --skip 20 \
    --steps 60 --html "$W/mcore_ab.html" -- $TR1 examples/megatron_gpt_infer.py --steps 85
}

# 5. issue 16: ab's unprofiled ground truth for every shape of the what-if grid.
s_grid_ab() {
  for shape in h512_l8_b8 h1024_l8_b8 h2048_l8_b8 h4096_l8_b8 h8192_l8_b8 h16384_l8_b8 \
               h4096_l4_b64 h1024_l16_b1; do
    IFS=_ read -r h l b <<<"$shape"
    run "grid_ab_$shape" 45 $PP ab -o "$W/grid_ab/${shape}_s2" --policies device,event \
      --rounds 3 --skip 20 --steps 100 -- $DL --hidden "${h#h}" --layers "${l#l}" \
      --batch "${b#b}" --stages 2 --steps 125
  done
}

# 3b. issue 14, re-measured after the mark was cut to a few C calls: both policies, the
#     bench's default hidden 4096 and the launch-bound hidden 1024, each in 2 processes
#     (the VM's host speed differs from process to process).
s_timing2() {
  for h in 4096 1024; do
    for rep in 1 2; do
      for s in event device; do
        run "bench_timing_h${h}_${s}_p$rep" 60 python3 benchmarks/bench_ab_timing.py --sync $s \
          --hidden $h --rounds 30 --json "$W/bench_timing_h${h}_${s}_p$rep.json"
      done
    done
  done
}

# 6. issue 16: is the VM's host mode the CPU's or the process's? (benchmarks/host_modes.py)
s_hostmodes() {
  run hostmodes 200 python3 benchmarks/host_modes.py --cpus 0-$(( $(nproc) - 1 )) --per-cpu 5 \
    --free 40 --torch-per-cpu 1 --torch-free 12 --json "$W/hostmodes.json"
}

# 7. issue 16: the grid again with every job bound to GRID_CPUS (taskset), Kineto and ab.
s_grid_pinned() {
  run grid_pinned $(( $(left) - 20 )) python3 benchmarks/whatif_grid.py capture \
    --out "$W/grid_pinned" --cpu-bind "${GRID_CPUS:-2-3}" --traces "${GRID_TRACES:-kineto,ab}" \
    --repeats "${GRID_REPEATS:-3}" --budget-s $(( $(left) - 40 )) \
    ${GRID_SHAPES:+--shapes $GRID_SHAPES} --nsys "$NSYS"
}

# 3c. issue 14: the bench's paired design (200 rounds x 50 steps), 2 processes per cell.
s_timing3() {
  for rep in 1 2; do
    for h in 1024 4096; do
      for s in event device; do
        run "bench_paired_h${h}_${s}_p$rep" 70 python3 benchmarks/bench_ab_timing.py --sync $s \
          --hidden $h --json "$W/bench_paired_h${h}_${s}_p$rep.json"
      done
    done
  done
}

# 6b. issue 16: the host mode with address-space randomization off (setarch -R).
s_hostmodes2() {
  run hostmodes_aslr 150 python3 benchmarks/host_modes.py --cpus 0 --per-cpu 0 --free 40 \
    --no-aslr 40 --torch-free 10 --torch-no-aslr 10 --json "$W/hostmodes_aslr.json"
}

# 7b. issue 16: the grid with every job under setarch -R (GRID_* as in 7).
s_grid_noaslr() {
  run grid_noaslr $(( $(left) - 20 )) python3 benchmarks/whatif_grid.py capture \
    --out "$W/grid_noaslr" --no-aslr --traces "${GRID_TRACES:-kineto,ab}" \
    --repeats "${GRID_REPEATS:-3}" --budget-s $(( $(left) - 40 )) \
    ${GRID_SHAPES:+--shapes $GRID_SHAPES} --nsys "$NSYS"
}

# 7c. issue 16: the what-if inside one process: each shape traced once per repeat with both
#     policies (decode_loop.py --switch), Kineto and Nsight (benchmarks/grid_switch.py).
s_grid_switch() {
  run grid_switch $(( $(left) - 20 )) python3 benchmarks/whatif_grid.py capture \
    --out "$W/grid_switch" --traces "${GRID_TRACES:-kineto-switch,nsys-switch}" \
    --repeats "${GRID_REPEATS:-3}" --first-repeat "${GRID_FIRST:-0}" \
    --budget-s $(( $(left) - 40 )) \
    ${GRID_SHAPES:+--shapes $GRID_SHAPES} --nsys "$NSYS"
}

# 8. issue 25: ground truth for the unprofiled what-if on variety (one H200): a traced device
#    run (Kineto and Nsight) and ab with 8 rounds in random order, on Megatron-Core at PP=1
#    (an A/A: no send/recv at world size 1, so the policy drop set is empty) ...
s_v25_mcore() {
  for tr in kineto nsys; do
    run "v25_mcore_$tr" 70 $PP run -o "$W/v25/mcore_$tr/device" --trace $tr --nsys "$NSYS" \
      --sync device --skip 10 --steps 20 -- $TR1 examples/megatron_gpt_infer.py --steps 40
  done
  run v25_mcore_ab 200 $PP ab -o "$W/v25/mcore_ab" --policies device,event --rounds 8 \
    --order random --seed 25 --skip 20 --steps 60 -- $TR1 examples/megatron_gpt_infer.py --steps 85
}

# ... and the decode loop in a host-bound (hidden 1024) and a GPU-bound (hidden 8192) shape.
s_v25_dl() {
  for h in 1024 8192; do
    DLS="--hidden $h --layers 8 --batch 8 --stages 2"
    run "v25_dl_h${h}_traced" 40 $PP run -o "$W/v25/dl_h$h/device" --sync device --skip 20 \
      --steps 30 --no-report -- $DL $DLS --steps 60
    run "v25_dl_h${h}_ab" 110 $PP ab -o "$W/v25/dl_h${h}_ab" --policies device,event \
      --rounds 8 --order random --seed 25 --skip 20 --steps 100 -- $DL $DLS --steps 125
  done
}

# 9. issue 23: a user's own decode loop that never imports profplug (.client/, not in the
#    repo: carry it), its step function named in the script (__main__) and in its module
#    (imported before torch); and a window that never opens (--skip past the job's end).
s_v23() {
  UC="python3 .client/user_decode.py"
  run v23_main_fn 60 $PP run -o "$W/v23/main_fn" --skip 10 --steps 20 \
    --step-fn __main__:decode_step -- $TR1 .client/user_decode.py --steps 60
  run v23_mod_fn 60 $PP run -o "$W/v23/mod_fn" --trace nsys --nsys "$NSYS" --skip 10 \
    --steps 20 --step-fn userpipe.stages:pipeline_step -- $UC --steps 60
  run v23_skip_past 40 $PP run -o "$W/v23/skip_past" --skip 100 --steps 10 \
    --step-fn __main__:decode_step -- $UC --steps 20
}

# 10. issue 25: the observer effect in a profiled run (untraced steps before and after the
#     window, timed like ab), Megatron-Core PP=1 and the decode loop at hidden 1024.
s_v25_obs() {
  run v25_obs_mcore 70 $PP run -o "$W/v25obs/mcore" --sync device --skip 20 --steps 20 \
    -- $TR1 examples/megatron_gpt_infer.py --steps 80
  run v25_obs_dl 40 $PP run -o "$W/v25obs/dl_h1024" --sync device --skip 20 --steps 30 \
    -- $DL --hidden 1024 --layers 8 --batch 8 --stages 2 --steps 100
}

# 11. issue 26: ab round 2. The README headline job (decode loop, hidden 1024, 2 local
#    stages) switched every 10 steps inside each run (the new default) and, beside it,
#    separate runs in the counterbalanced order; an A/A of the switched design; the step
#    timer's overhead (goal: the paired CI's upper end under 1%); Megatron-Core at PP=1
#    (no send/recv: no policy reaches it; ab should stop after one round, exit 7).
s_ab26() {
  mkdir -p "$W/ab26"
  DLS="--hidden 1024 --layers 8 --batch 8 --stages 2"
  run ab26_dl_switched 100 $PP ab -o "$W/ab26/dl_switched" --policies device,event,none \
    --rounds 5 --skip 20 --steps 100 --html "$W/ab26/dl_switched.html" -- $DL $DLS --steps 125
  run ab26_dl_separate 150 $PP ab -o "$W/ab26/dl_separate" --switch-every 0 \
    --policies device,event --rounds 6 --skip 20 --steps 100 \
    --html "$W/ab26/dl_separate.html" -- $DL $DLS --steps 125
  run ab26_dl_aa 70 $PP ab -o "$W/ab26/dl_aa" --aa --rounds 5 --skip 20 --steps 100 \
    -- $DL $DLS --steps 125
  for s in event device; do
    run "ab26_timing_$s" 70 python3 benchmarks/bench_ab_timing.py --sync $s --hidden 1024 \
      --json "$W/ab26/bench_timing_h1024_$s.json"
  done
  run ab26_mcore_pp1 60 $PP ab -o "$W/ab26/mcore_pp1" --rounds 3 --skip 20 --steps 60 \
    -- $TR1 examples/megatron_gpt_infer.py --steps 85
}

# 12. issue 25: a GPU-bound shape (hidden 8192, batch 256): a traced device run with the
#     observer's untraced steps, and ab in the switched design (5 runs).
s_v25_gpu() {
  DLS="--hidden 8192 --layers 8 --batch 256 --stages 2"
  run v25_gpu_traced 60 $PP run -o "$W/v25gpu/traced_device" --sync device --skip 20 \
    --steps 30 -- $DL $DLS --steps 100
  run v25_gpu_ab 150 $PP ab -o "$W/v25gpu/ab" --policies device,event --rounds 5 --skip 20 \
    --steps 100 -- $DL $DLS --steps 125
}

for sec in ${SECTIONS:-mcore dl_ab timing mcore_ab grid_ab}; do "s_$sec"; done

say "done; packing"
cd /tmp && find session -type f -size +8M -print -delete >> "$LOG"
# an Nsight report whose SQLite export is there travels as the export alone
find session -name '*.nsys-rep' | while read -r f; do
  [ -f "${f%.nsys-rep}.sqlite" ] && rm -f "$f"; done
cp "$LOG" "$FINAL/log.txt"
tar czf - session | split -b 15M -d - "$FINAL/session.tgz.part-"  # 16 MiB a file back
ls -la "$FINAL"
