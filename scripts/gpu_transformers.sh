#!/usr/bin/env bash
# transformers' own pipeline-parallel generate (DistributedConfig(pp_size=2),
# examples/hf_pipeline_generate.py, a script that never imports profplug) under profplug on
# the GPU machine, in one device call (issue 49).
#
#   bash scripts/gpu_transformers.sh one-gpu       # nvidia-h100-x1 / nvidia-h200
#   bash scripts/gpu_transformers.sh two-gpu       # nvidia-h100-x2 / nvidia-h200-x2
#   carry: .whl (nvtx, msgspec: profplug's) and .whl-hf (transformers and what it needs that
#   the device's torch 2.11 environment lacks), and .devlibs (libdw for nsys). Made here with
#     python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 \
#       --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
#       --platform manylinux2014_x86_64 -d .whl-hf \
#       transformers==5.25.0 accelerate==1.16.0 huggingface-hub==2.4.0 tokenizers==0.23.3 \
#       safetensors==0.8.0 hf-xet==1.8.0 kernels==0.19.1 tomlkit==0.15.3 regex pyyaml tqdm \
#       psutil packaging httpx2==2.17.0 httpcore2==2.17.0 h11 anyio idna truststore \
#       pydantic pydantic-core annotated-types typing-inspection annotated-doc
#   (numpy, filelock, fsspec, jinja2, typing-extensions come with torch; typer, click, rich
#   with profplug's own environment there.)
#
# one-gpu: two ranks can share one GPU only through gloo (NCCL refuses two ranks on one
#   device), where transformers moves each transfer's tensors to the CPU and calls no
#   torch.cuda.synchronize(): the example runs with --share-gpu (both ranks on cuda:0) under
#   profplug run, Kineto and Nsight, and a short switched profplug ab: the annotations
#   (Megatron's range names), the steps (one per forward) and identical outputs on a real
#   CUDA build; the policies have no synchronize to act on there.
# two-gpu: NCCL, one stage per GPU, the synchronize after every send/recv (SECTIONS, default
#   all three, run in this order in one call: analyze reads what traced and ab wrote; it can
#   also be run here afterwards on the unpacked hf.tgz):
#   traced    profplug run, Kineto and Nsight, --sync device and --sync event
#   ab        profplug ab, switched every 10 steps, ROUNDS (8) runs, the traced Kineto device
#             run's what-if drawn against it
#   analyze   compare TRACED AB, whatif TRACED --against EVENT (Kineto and Nsight)
# Every step is logged and the script carries on; results: $OUT/log.txt, $OUT/hf.tgz
# (run.json, ab.json, status files, the analyses; traces when small enough).
set -u
MODE=${1:-two-gpu}
BUDGET_S=${BUDGET_S:-570}
SECTIONS=${SECTIONS:-"traced ab analyze"}
ROUNDS=${ROUNDS:-8}
W=/tmp/hf
. "$(dirname "$0")/gpu_common.sh"
has() { case " $SECTIONS " in *" $1 "*) return 0;; esac; return 1; }
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl-hf/*.whl >>"$LOG" 2>&1 || say "transformers wheels FAILED"
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  python3 -c "import torch;print('torch',torch.__version__,'cuda',torch.version.cuda,'gpus',torch.cuda.device_count())"
  python3 -c "import transformers, accelerate;print('transformers',transformers.__version__,'accelerate',accelerate.__version__)"
  python3 -c "import transformers.distributed.pipeline_parallel as p;print('pipeline_parallel ok')"
} > "$W/machine.txt" 2>&1
cat "$W/machine.txt" >> "$LOG"
NGPU=$(nvidia-smi -L | wc -l)
TR="python3 -m torch.distributed.run --nproc-per-node 2"
# a Llama of 8 layers (4 per stage), hidden 1024, batch 8: 4 generate calls of 32 tokens
# = 128 forwards (steps) on every rank
JOB="examples/hf_pipeline_generate.py --hidden 1024 --layers 8 --vocab 32000 --batch 8
     --prompt 32 --calls 4 --new-tokens 32"

# what the traces and status files say: ranges, steps, sites (the proof of the annotations)
summary() {
  python3 - "$1" <<'EOF' >> "$LOG" 2>&1
import collections, gzip, json, pathlib, sys
run = pathlib.Path(sys.argv[1])
doc = json.loads((run / "run.json").read_text())
for r in doc["ranks"]:
    w = r.get("window") or {}
    print(f"rank {r['rank']}: {r['status']}, steps from {w.get('step_source')}, "
          f"first {w.get('first_step')}, seen {w.get('steps_seen')}; sites "
          + ", ".join(f"{s['name'].rpartition('.')[2]} {s['calls']}" for s in r.get("sync_sites") or [])
          + f"; policy {(r.get('policy') or {}).get('counts')}")
for p in sorted((run / "kineto").glob("rank*.json.gz")):
    names = collections.Counter(e["name"] for e in json.loads(gzip.open(p).read())["traceEvents"]
                                if e.get("cat") == "user_annotation" and e["name"].startswith("profplug."))
    print(p.name, dict(names.most_common(8)))
print("warnings:", doc.get("warnings"))
EOF
}

if [ "$MODE" = one-gpu ]; then
  for tr in kineto nsys; do
    run "one_${tr}" 150 $PP run -o "$W/one/$tr" --trace $tr --nsys "$NSYS" --skip 10 \
      --steps 40 -- $TR $JOB --share-gpu
    [ "$tr" = kineto ] && summary "$W/one/$tr"
  done
  run "one_ab" 240 $PP ab -o "$W/one/ab" --policies device,event,none --rounds 3 \
    --switch-every 10 --skip 10 --steps 90 -- $TR $JOB --share-gpu
elif [ "$NGPU" -lt 2 ]; then
  say "two-gpu needs 2 GPUs, this machine has $NGPU: run 'one-gpu' here"
else
  if has traced; then
    for tr in kineto nsys; do
      for s in device event; do
        run "traced_${tr}_$s" 120 $PP run -o "$W/$tr/$s" --trace $tr --nsys "$NSYS" \
          --sync $s --skip 10 --steps 40 -- $TR $JOB
      done
    done
    summary "$W/kineto/device"
  fi
  has ab && run "ab_switched" 330 $PP ab -o "$W/ab" --rounds "$ROUNDS" --switch-every 10 \
    --skip 10 --steps 100 --whatif "$W/kineto/device" -- $TR $JOB
  has analyze && for tr in kineto nsys; do
    [ -d "$W/$tr/device" ] || continue
    run "compare_${tr}_ab" 120 $PP compare "$W/$tr/device" "$W/ab" --nsys "$NSYS"
    run "whatif_${tr}_against" 120 $PP whatif "$W/$tr/device" --against "$W/$tr/event" \
      --nsys "$NSYS"
  done
fi
say "done"
cp "$LOG" "$FINAL/log.txt"
cd /tmp && tar czf "$FINAL/hf.tgz" hf
if [ "$(stat -c %s "$FINAL/hf.tgz")" -gt 15000000 ]; then
  tar czf "$FINAL/hf.tgz" --exclude='*.nsys-rep' --exclude='*.qdstrm' --exclude='*.sqlite' hf
fi
ls -la "$FINAL"
