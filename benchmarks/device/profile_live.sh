#!/usr/bin/env bash
# On the device machine, as one command (carrying .device from prepare.sh): why live sessions fall behind from N = 16.
# The live server (benchmarks/device/live_server.py, 7B pool, scripted STT / LLM) at N = 16 under three py-spy samplers
# attached at once without pausing it (on-CPU, GIL holders, every thread idle included), per-thread CPU from /proc,
# then native frames for 8 s (paused per sample), the cgroup's CPU throttling before and after; then N = 16, 32 again
# with OMP_WAIT_POLICY=PASSIVE.
# LIVE_WEIGHTS=random:tiny LIVE_DEVICE=cpu rehearses it on a CPU. Under $OUT: env.txt, four raw collapsed-stack files
# (`thread;frames count` per line), passive.json, logs.tgz (the rest: the device tool brings back 8 files a call).
set -uo pipefail
cd "$(dirname "$0")/../.."
O="${OUT:?the device tool sets OUT}"
SPY=/tmp/site/bin/py-spy
if [ "${LIVE_DEVICE:-cuda}" = cpu ]; then SPY=$(command -v py-spy)  # the rehearsal: this machine's own packages
else python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .device/whl/*.whl \
  || { echo "could not install the carried wheels" >&2; exit 2; }
fi
export PYTHONPATH="/tmp/site:$PWD" HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1 KAME_SHARED_DATA="$PWD/.device/data"
LIVE=(python3 -m benchmarks.device.live_server --weights "${LIVE_WEIGHTS:-random:moshi-7b}" --device "${LIVE_DEVICE:-cuda}" --kv-frames 1500
      --kv-grow-frames 0)
{ nproc; cat /sys/fs/cgroup/cpu.max 2>/dev/null; lscpu | head -20; nvidia-smi -L; uname -r
  cat /proc/sys/kernel/yama/ptrace_scope 2>/dev/null; python3 -c 'import torch; print(torch.__version__, torch.get_num_threads())'
} > "$O/env.txt" 2>&1
{ echo "cgroup cpu.stat before:"; cat /sys/fs/cgroup/cpu.stat; } >> "$O/env.txt" 2>&1
timeout 220 "${LIVE[@]}" --ns 16,16,16 --json "$O/profiled.json" > "$O/profiled.log" 2>&1 &
guard=$!
sleep 1; pid=$(pgrep -P $guard | head -1)
for _ in $(seq 300); do grep -q "loaded in" "$O/profiled.log" && break; kill -0 $pid 2>/dev/null || break; sleep 0.5; done
echo "loaded after ${SECONDS}s" >> "$O/env.txt"
sleep 2
$SPY record --pid $pid --nonblocking --threads -r 200 -d 25 -f raw -o "$O/oncpu.txt" > "$O/spy_oncpu.log" 2>&1 &
$SPY record --pid $pid --nonblocking --threads --gil -r 200 -d 25 -f raw -o "$O/gil.txt" > "$O/spy_gil.log" 2>&1 &
$SPY record --pid $pid --nonblocking --threads --idle -r 100 -d 25 -f raw -o "$O/idle.txt" > "$O/spy_idle.log" 2>&1 &
for i in $(seq 26); do
  { echo "== $i $(date +%s.%N)"; for t in /proc/$pid/task/*; do echo "$(cat $t/comm 2>/dev/null) $(cut -d' ' -f14,15 $t/stat 2>/dev/null)"; done; } >> "$O/threads.txt"
  sleep 1
done
# native frames need the process paused per sample: last, briefly, at a low rate (that round's figures are perturbed)
$SPY record --pid $pid --threads --native -r 50 -d 8 -f raw -o "$O/oncpu_native.txt" > "$O/spy_native.log" 2>&1
wait $guard; echo "profiled rc=$?" >> "$O/env.txt"
wait
{ echo "cgroup cpu.stat after:"; cat /sys/fs/cgroup/cpu.stat; } >> "$O/env.txt" 2>&1
OMP_WAIT_POLICY=PASSIVE timeout 150 "${LIVE[@]}" --ns 16,32 --json "$O/passive.json" > "$O/passive.log" 2>&1
echo "passive rc=$? at ${SECONDS}s" >> "$O/env.txt"
# the device tool brings back 8 files a call: the logs, per-thread CPU and the profiled round's JSON travel packed
tar -C "$O" -czf "$O/logs.tgz" profiled.json profiled.log passive.log threads.txt spy_oncpu.log spy_gil.log \
  spy_idle.log spy_native.log && rm -f "$O"/*.log "$O/threads.txt" "$O/profiled.json"
