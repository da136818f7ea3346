# Sourced by the device-call scripts (gpu_session.sh, gpu_two_gpu_validation.sh): the
# deadline, the log and the per-section runner, the environment every GPU job gets, and the
# install of the carried wheels and of profplug. Set BUDGET_S and W before sourcing.
T0=$(date +%s)
FINAL=${OUT:-/tmp/out}
rm -rf "$W"; mkdir -p "$W" "$FINAL"
LOG=$W/log.txt
export LD_LIBRARY_PATH=$PWD/.devlibs:${LD_LIBRARY_PATH:-}
export NSYS=${NSYS:-/opt/nvidia/nsight-compute/2025.3.1/host/target-linux-x64/nsys}
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
say() { echo "=== +$(( $(date +%s) - T0 ))s $*" | tee -a "$LOG"; }
left() { echo $(( BUDGET_S - ($(date +%s) - T0) )); }
# run NAME LIMIT_S CMD...: under the smaller of LIMIT_S and the time left; output to NAME.txt
run() {
  local name=$1 lim=$2; shift 2
  local l; l=$(left); [ "$l" -lt "$lim" ] && lim=$l
  if [ "$lim" -lt 15 ]; then say "SKIP $name (budget)"; return 0; fi
  say "$name (limit ${lim}s)"
  timeout "$lim" "$@" > "$W/$name.txt" 2>&1
  local rc=$?
  echo "exit $rc" >> "$W/$name.txt"
  say "$name: exit $rc"; tail -4 "$W/$name.txt" | tee -a "$LOG"
}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl >>"$LOG" 2>&1 || say "wheels FAILED"
python3 -m pip install -q --no-index --no-deps --no-build-isolation --no-compile \
  --target /tmp/pp . >>"$LOG" 2>&1 || say "profplug install FAILED"
export PYTHONPATH=/tmp/pp:/tmp/site
# -P: the install in /tmp/pp, not the checkout's profplug/ in the working directory
# (which has no profplug.analyzers: that ships only in an install)
PP="python3 -P -m profplug"
