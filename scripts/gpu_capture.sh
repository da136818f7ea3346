#!/usr/bin/env bash
# Captures sample_traces/ on a 2x H200 machine (the device tool's nvidia-h200-x2), in one go.
# Needs .whl (nvtx, msgspec, megatron-core wheels for cp312) and .devlibs (libdw for
# nsys) carried along; writes everything under $OUT. Each step logs and carries on on failure.
set -u
FINAL=${OUT:-/tmp/out}
OUT=/tmp/capture  # working dir: logs; packed into $FINAL at the end (few files come back)
rm -rf "$OUT"; mkdir -p "$OUT" "$FINAL"
export LD_LIBRARY_PATH=$PWD/.devlibs:${LD_LIBRARY_PATH:-}
export NSYS=${NSYS:-/opt/nvidia/nsight-compute/2025.3.1/host/target-linux-x64/nsys}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1
LOG=$OUT/log.txt
ST=$OUT/st
mkdir -p "$ST"
step() { echo "=== $(date +%T) $*" | tee -a "$LOG"; }
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl >>"$LOG" 2>&1
python3 -m pip install -q --no-index --no-deps --no-build-isolation --no-compile \
  --target /tmp/pp . >>"$LOG" 2>&1 || step "profplug install FAILED"
export PYTHONPATH=/tmp/pp:/tmp/site
# -P: the install in /tmp/pp, not the checkout's profplug/ in the working directory
# (which has no profplug.analyzers: that ships only in an install)
PP="python3 -P -m profplug"
TR="python3 -m torch.distributed.run --nproc-per-node 2"
MODEL=${MODEL:-"--hidden 1024 --heads 8 --layers 8 --batch 8"}
ONLY=${ONLY:-all}
want() { [ "$ONLY" = all ] || [[ ",$ONLY," == *",$1,"* ]]; }

step "machine"
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  python3 -c "import torch;print('torch',torch.__version__,'cuda',torch.version.cuda,'nccl',torch.cuda.nccl.version(),'gpus',torch.cuda.device_count())"
  $NSYS --version; nproc; } 2>&1 | tee -a "$LOG" > "$OUT/machine.txt"

if want plain; then
  step "plain (unprofiled) A/B: 1000 steps per policy, and 40 steps for the observer effect"
  for s in device event none; do
    $TR examples/infer.py $MODEL --steps 1000 --sync $s > "$OUT/plain_${s}_1000.txt" 2>&1
    $TR examples/infer.py $MODEL --steps 40 --sync $s > "$OUT/plain_${s}_40.txt" 2>&1
    grep -h mean_step_us "$OUT/plain_${s}_1000.txt" "$OUT/plain_${s}_40.txt" | tee -a "$LOG"
  done
  for s in event none; do
    if diff <(grep '^tokens' "$OUT/plain_device_1000.txt") <(grep '^tokens' "$OUT/plain_${s}_1000.txt") >/dev/null; then
      echo "tokens device == $s over 1000 steps" | tee -a "$LOG"
    else echo "TOKENS DIFFER device vs $s" | tee -a "$LOG"; fi
  done
fi

if want kineto; then
  for s in device event; do
    step "infer kineto $s"
    $PP run -o "$ST/pp2_infer_kineto/$s" --sync $s --skip 20 --steps 20 -- \
      $TR examples/infer.py $MODEL --steps 40 > "$OUT/run_kineto_$s.txt" 2>&1
    echo "exit $?" >> "$OUT/run_kineto_$s.txt"; tail -25 "$OUT/run_kineto_$s.txt" >> "$LOG"
  done
fi

if want nsys; then
  for s in device event; do
    step "infer nsys $s"
    $PP run -o "$ST/pp2_infer_nsys/$s" --trace nsys --nsys "$NSYS" --sync $s --skip 20 --steps 20 -- \
      $TR examples/infer.py $MODEL --steps 40 > "$OUT/run_nsys_$s.txt" 2>&1
    echo "exit $?" >> "$OUT/run_nsys_$s.txt"; tail -25 "$OUT/run_nsys_$s.txt" >> "$LOG"
  done
fi

if want megatron; then
  for s in device event; do
    step "megatron plain $s (patched standalone), then kineto"
    $TR examples/megatron_gpt_infer.py --steps 40 --sync $s > "$OUT/plain_megatron_$s.txt" 2>&1
    echo "exit $?" >> "$OUT/plain_megatron_$s.txt"; tail -8 "$OUT/plain_megatron_$s.txt" >> "$LOG"
    $PP run -o "$ST/pp2_megatron_kineto/$s" --sync $s --skip 20 --steps 20 -- \
      $TR examples/megatron_gpt_infer.py --steps 40 > "$OUT/run_megatron_$s.txt" 2>&1
    echo "exit $?" >> "$OUT/run_megatron_$s.txt"; tail -25 "$OUT/run_megatron_$s.txt" >> "$LOG"
  done
  $TR examples/megatron_gpt_infer.py --steps 40 > "$OUT/plain_megatron_unpatched.txt" 2>&1
  tail -6 "$OUT/plain_megatron_unpatched.txt" >> "$LOG"
  for s in event; do
    if diff <(grep '^tokens' "$OUT/plain_megatron_device.txt") <(grep '^tokens' "$OUT/plain_megatron_$s.txt") >/dev/null \
       && diff <(grep '^tokens' "$OUT/plain_megatron_device.txt") <(grep '^tokens' "$OUT/plain_megatron_unpatched.txt") >/dev/null; then
      echo "megatron tokens: patched device == event == unpatched Megatron" | tee -a "$LOG"
    else echo "MEGATRON TOKENS DIFFER" | tee -a "$LOG"; fi
  done
fi

if want megatron_nsys; then
  for s in device event; do
    step "megatron nsys $s"
    $PP run -o "$ST/pp2_megatron_nsys/$s" --trace nsys --nsys "$NSYS" --sync $s --skip 20 --steps 20 -- \
      $TR examples/megatron_gpt_infer.py --steps 40 > "$OUT/run_megatron_nsys_$s.txt" 2>&1
    echo "exit $?" >> "$OUT/run_megatron_nsys_$s.txt"; tail -12 "$OUT/run_megatron_nsys_$s.txt" >> "$LOG"
    rm -f "$ST/pp2_megatron_nsys/$s/report.html"
  done
fi

if want observer; then
  # Observer effect: the same 100-step job, interleaved unprofiled / Kineto / nsys runs.
  # The window is steps 50-99; infer.py averages steps 50-98 in every run (the window's last
  # step also writes the trace), so mean_step_us compares like with like.
  step "observer effect: 3 rounds of plain/kineto (device, event) and nsys (device)"
  OBS=/tmp/obs; rm -rf $OBS; mkdir -p $OBS
  for i in 1 2 3; do
    for s in device event; do
      $TR examples/infer.py $MODEL --steps 100 --timed 50:99 --sync $s 2>&1 | grep -h mean_step_us | sed "s/^/r$i plain /" | tee -a "$LOG"
      $PP run -o $OBS/k$i$s --no-report --sync $s --skip 50 --steps 50 -- \
        $TR examples/infer.py $MODEL --steps 100 --timed 50:99 2>&1 | grep -h mean_step_us | sed "s/^/r$i kineto /" | tee -a "$LOG"
    done
    $PP run -o $OBS/n${i}device --no-report --trace nsys --nsys "$NSYS" --sync device --skip 50 --steps 50 -- \
      $TR examples/infer.py $MODEL --steps 100 --timed 50:99 2>&1 | grep -h mean_step_us | sed "s/^/r$i nsys /" | tee -a "$LOG"
  done
  for d in $OBS/*; do $PP report $d -f csv 2>&1 | sed "s|^|obs $(basename $d) |" >> "$LOG"; done
fi

if want knobs; then
  # Which part of Kineto costs the host time? device policy, 2 rounds of each variant.
  step "observer knobs: plain / kineto default / no cuda_sync events / no all-threads / no CPU activity"
  KN=/tmp/knobs; rm -rf $KN; mkdir -p $KN
  for i in 1 2; do
    $TR examples/infer.py $MODEL --steps 100 --timed 50:99 --sync device 2>&1 | grep -h mean_step_us | sed "s/^/r$i plain /" | tee -a "$LOG"
    for v in default nosync nothreads nocpu; do
      case $v in nosync) E="PROFPLUG_KINETO_SYNC_EVENTS=0";; nothreads) E="PROFPLUG_KINETO_ALL_THREADS=0";; nocpu) E="PROFPLUG_KINETO_CPU=0";; *) E="X=1";; esac
      env $E $PP run -o $KN/$v$i --no-report --sync device --skip 50 --steps 50 -- \
        $TR examples/infer.py $MODEL --steps 100 --timed 50:99 2>&1 | grep -h mean_step_us | sed "s/^/r$i $v /" | tee -a "$LOG"
    done
  done
  for d in $KN/*; do $PP report $d -f csv 2>&1 | sed "s|^|knob $(basename $d) |" >> "$LOG"; done
fi

if want repeats; then
  # More device/event pairs, to see the run-to-run spread the what-if is judged against.
  step "repeats: 2 more device/event pairs, Kineto and nsys"
  RP=$ST/repeats; mkdir -p $RP
  for i in 2 3; do
    for s in device event; do
      $PP run -o $RP/kineto$i/$s --no-report --sync $s --skip 20 --steps 20 -- \
        $TR examples/infer.py $MODEL --steps 40 > /dev/null 2>&1
      $PP run -o $RP/nsys$i/$s --no-report --trace nsys --nsys "$NSYS" --sync $s --skip 20 --steps 20 -- \
        $TR examples/infer.py $MODEL --steps 40 > /dev/null 2>&1
      rm -f $RP/nsys$i/$s/nsys/*.nsys-rep; gzip -f $RP/nsys$i/$s/nsys/*.sqlite 2>/dev/null
    done
  done
  du -sh $RP | tee -a "$LOG"
fi

if want waits; then
  step "three waits (1 GPU) kineto + nsys, and unprofiled"
  CUDA_VISIBLE_DEVICES=0 python3 examples/three_waits.py --steps 40 > "$OUT/plain_waits.txt" 2>&1
  CUDA_VISIBLE_DEVICES=0 $PP run -o "$ST/h200_three_waits/kineto" --skip 10 --steps 10 -- \
    python3 examples/three_waits.py --steps 25 > "$OUT/run_waits_kineto.txt" 2>&1
  CUDA_VISIBLE_DEVICES=0 $PP run -o "$ST/h200_three_waits/nsys" --trace nsys --nsys "$NSYS" \
    --skip 10 --steps 10 -- python3 examples/three_waits.py --steps 25 > "$OUT/run_waits_nsys.txt" 2>&1
  tail -30 "$OUT/run_waits_kineto.txt" "$OUT/run_waits_nsys.txt" >> "$LOG"
fi

if want bench; then
  step "annotate benchmark on the H200 host"
  python3 benchmarks/bench_annotate.py > "$OUT/bench_annotate.txt" 2>&1; cat "$OUT/bench_annotate.txt" >> "$LOG"
fi

if want analyze; then
  step "nsys analyze cuda_api_sync / stats on the exports"
  for f in $(find "$ST" -name '*.sqlite'); do
    echo "## $f" >> "$OUT/nsys_analyze.txt"
    $NSYS analyze -r cuda_api_sync "$f" >> "$OUT/nsys_analyze.txt" 2>&1
    $NSYS stats -r cuda_api_sum --format csv "$f" >> "$OUT/nsys_analyze.txt" 2>&1
  done
fi

step "pack"
du -ah "$ST" | sort -h | tail -40 >> "$LOG"
for d in "$ST"/*/; do [ -d "$d" ] || continue; n=$(basename "$d"); tar czf "$FINAL/$n.tgz" -C "$ST" "$n" 2>>"$LOG"; done
tar czf "$FINAL/logs.tgz" --exclude=st -C "$OUT" . 2>>"$LOG"
cp "$LOG" "$FINAL/log.txt"
ls -la "$FINAL"
