#!/usr/bin/env bash
# One device call on one GPU (nvidia-h100-x1 or nvidia-h200): compare's process-speed check
# (analyzers/compare/process_speed.py) on real traced pairs. The decode loop (one GPU, two
# local stages, launch-bound hidden 1024): three traced Kineto runs per policy, each with the
# untraced steps run.json records before its window (--skip 30: 14 of them); every device x
# event pair compared, the two A/A pairs (runs 1 and 2 of one policy), and `profplug ab` (5
# runs, switched) as the unprofiled truth. What to read: per pair, both signs (observer F,
# untraced U with the syncs) / differs / verdict (summary.txt): pairs whose observer effects
# differ, or whose untraced steps differ where the syncs do not explain it, name no winner;
# the A/A pairs should not be flagged more often than pairs of one policy drift apart. Needs .whl carried (as gpu_session.sh). Results: $OUT/log.txt,
# $OUT/summary.txt, $OUT/speed.tgz.part-*.
#   BUDGET_S=540 bash scripts/gpu_process_speed.sh
set -u
BUDGET_S=${BUDGET_S:-540}
W=/tmp/speed
. "$(dirname "$0")/gpu_common.sh"
DL="python3 examples/decode_loop.py --hidden 1024 --layers 8 --batch 8 --stages 2"
nvidia-smi --query-gpu=name,driver_version --format=csv >> "$LOG" 2>&1

for i in 1 2 3; do
  for s in device event; do
    run "run_${s}_$i" 45 $PP run -o "$W/runs/${s}_$i" --sync $s --skip 30 --steps 30 \
      --no-report -- $DL --steps 80
  done
done
for i in 1 2 3; do
  for j in 1 2 3; do
    run "cmp_d${i}_e$j" 30 $PP compare "$W/runs/device_$i" "$W/runs/event_$j" --no-whatif \
      --no-cross-rank -f json -o "$W/cmp/d${i}_e$j.json"
  done
done
for s in device event; do
  run "aa_$s" 30 $PP compare "$W/runs/${s}_1" "$W/runs/${s}_2" --no-whatif --no-cross-rank \
    -f json -o "$W/cmp/aa_$s.json"
done
run ab 150 $PP ab -o "$W/ab" --policies device,event --rounds 5 --skip 20 --steps 100 \
  -- $DL --steps 125

python3 - "$W" > "$FINAL/summary.txt" 2>&1 <<'EOF'
import json, sys
from pathlib import Path
w = Path(sys.argv[1])
for f in sorted((w / "cmp").glob("*.json")):
    d = json.loads(f.read_text())
    s = d.get("speed") or {}
    print(f"{f.stem:8} observer F {s.get('factor')} noise {s.get('noise_factor')} "
          f"{s.get('observer_differs')}; untraced U {s.get('untraced_factor')} noise "
          f"{s.get('untraced_noise_factor')} syncs {s.get('device_syncs_per_step_a')}/"
          f"{s.get('device_syncs_per_step_b')} {s.get('untraced_differs')}; "
          f"differs {s.get('differs')} | {d.get('verdict')}")
ab = w / "ab" / "ab.json"
if ab.exists():
    summ = json.loads(ab.read_text()).get("summary") or {}
    print("ab:", {k: (v or {}).get("median_step_us") for k, v in summ.items()})
EOF
cat "$FINAL/summary.txt" >> "$LOG"

say "done; packing"
cd /tmp && find speed -type f -size +8M -print -delete >> "$LOG"
cp "$LOG" "$FINAL/log.txt"
tar czf - speed | split -b 15M -d - "$FINAL/speed.tgz.part-"
ls -la "$FINAL"
