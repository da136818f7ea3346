#!/usr/bin/env bash
# The two-GPU validation of the what-if and of profplug ab on Megatron-Core (issue 43), in
# one device call on nvidia-h200-x2 (any number of GPUs: the pipeline has one stage per GPU,
# so on one GPU it is a PP=1 dry run of the same steps).
#
#   carry: .whl (msgspec, nvtx, megatron-core wheels, cp312) and .devlibs (libdw for nsys)
#   SECTIONS="traced ab" BUDGET_S=560 bash scripts/gpu_two_gpu_validation.sh
#
# Two clients that never import profplug: examples/megatron_gpt_infer.py (the first) and
# examples/megatron_generate_loops.py (16 layers, batch 16, three generate calls with the
# job's own synchronize, host work and barrier between them). Sections, in order, each under
# what is left of BUDGET_S:
#   traced    per client: profplug run, Kineto and Nsight, device and event
#   ab        per client: profplug ab, switched (--switch-every 10), ROUNDS runs, with the
#             traced Kineto device run's what-if drawn against it
#   separate  the first client: profplug ab --switch-every 0, ROUNDS counterbalanced rounds
#   analyze   compare TRACED AB and whatif --against, per client (CPU only; also runnable
#             here afterwards on the unpacked results)
# Results: $OUT/log.txt and $OUT/two_gpu.tgz (run.json, ab.json, small traces, the analyses).
set -u
BUDGET_S=${BUDGET_S:-560}
SECTIONS=${SECTIONS:-"traced ab separate analyze"}
ROUNDS=${ROUNDS:-8}
W=/tmp/two_gpu
. "$(dirname "$0")/gpu_common.sh"
has() { case " $SECTIONS " in *" $1 "*) return 0;; esac; return 1; }
export PYTHONPATH=$PYTHONPATH:$PWD/examples
NGPU=$(nvidia-smi -L | wc -l)
TR="python3 -m torch.distributed.run --nproc-per-node $NGPU"
say "GPUs: $NGPU (pipeline stages: $NGPU)"
declare -A CLIENT=(
  [gpt]="examples/megatron_gpt_infer.py --steps 48"
  [loops]="examples/megatron_generate_loops.py --loops 3 --steps 24"
)

if has traced; then
  for c in gpt loops; do
    for tr in kineto nsys; do
      for s in device event; do
        run "traced_${c}_${tr}_$s" 120 $PP run -o "$W/$c/$tr/$s" --trace $tr --nsys "$NSYS" \
          --sync $s --skip 5 --steps 20 -- $TR ${CLIENT[$c]}
      done
    done
  done
fi
if has ab; then
  for c in gpt loops; do
    run "ab_${c}_switched" 200 $PP ab -o "$W/$c/ab_switched" --rounds "$ROUNDS" \
      --switch-every 10 --skip 10 --steps 60 --whatif "$W/$c/kineto/device" -- $TR ${CLIENT[$c]}
  done
fi
if has separate; then
  run "ab_gpt_separate" 300 $PP ab -o "$W/gpt/ab_separate" --rounds "$ROUNDS" \
    --switch-every 0 --order counterbalanced --skip 10 --steps 30 -- $TR ${CLIENT[gpt]}
fi
if has analyze; then
  for c in gpt loops; do
    for tr in kineto nsys; do
      [ -d "$W/$c/$tr/device" ] || continue
      run "whatif_${c}_${tr}_against" 120 $PP whatif "$W/$c/$tr/device" \
        --against "$W/$c/$tr/event" --nsys "$NSYS"
      for ab in ab_switched ab_separate; do
        [ -f "$W/$c/$ab/ab.json" ] || continue
        run "compare_${c}_${tr}_$ab" 120 $PP compare "$W/$c/$tr/device" "$W/$c/$ab" --nsys "$NSYS"
      done
    done
  done
fi
say "done"
cp "$LOG" "$FINAL/log.txt"
# traces too when the whole stays under what comes back (16 MiB a file)
cd /tmp && tar czf "$FINAL/two_gpu.tgz" two_gpu
if [ "$(stat -c %s "$FINAL/two_gpu.tgz")" -gt 15000000 ]; then
  tar czf "$FINAL/two_gpu.tgz" --exclude='*.nsys-rep' --exclude='*.qdstrm' two_gpu
fi
ls -la "$FINAL"
