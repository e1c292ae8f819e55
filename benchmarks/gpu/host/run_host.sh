#!/usr/bin/env bash
# The lent GPU machine's HOST CPU (an AMX Xeon, 16 cores): real CPU runs of what the CPU projection extrapolates to
# AWS c7i/m7i (AMX bf16, int8), and the sentiment-api recommendation (c7i.large: 1 worker x 1 thread, bf16) served
# for real on two pinned cores at the spec's 10 req/s.
#   bash benchmarks/gpu/host/run_host.sh OUTDIR   (~8-11 min; needs the wheels in .whl/, as run_on_device.sh)
# Caps: on 2026-11-27 BERT-base needed more than 90 s and Llama-1B more than 45 s.
set -u
OUT=${1:?usage: run_host.sh OUTDIR}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/log.txt") 2>&1
export PYTHONUNBUFFERED=1 TRANSFORMERS_VERBOSITY=error HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
[ -n "${SKIP_WHEELS:-}" ] || python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl || echo "WHEELS FAILED"
export PYTHONPATH="$PWD/src:/tmp/site"
T0=$(date +%s)
step() { local cap=$1; shift; echo "=== [$(( $(date +%s) - T0 ))s] $* (cap ${cap}s)"; timeout "$cap" "$@"; echo "=== rc=$?"; }
{
  lscpu; grep -m1 MHz /proc/cpuinfo; free -g; nproc
  python3 -c "import torch; print('torch', torch.__version__, 'threads', torch.get_num_threads(), torch.backends.cpu.get_cpu_capability()); print(torch.__config__.show())"
} > "$OUT/env.txt" 2>&1
tail -3 "$OUT/env.txt"
STORE=/tmp/host.sqlite  # measurements.json is what comes back
# 1. the recommendation, served: 1 worker x 1 thread on cores 0-1 (c7i.large: one core and its SMT sibling), load from 2-3
serve_check() {  # precision
  local p=$1 port=8123
  taskset -c "${SRV_CPUS:-0,1}" python3 -m rightsize serve distilbert --seq 64 --precision "$p" --workers 1 --threads 1 \
    --max-batch 4 --max-wait-ms 0 --router cpu --port $port > "/tmp/serve_$p.log" 2>&1 &
  local pid=$!
  python3 - $port <<'PY' || { echo "server not ready"; tail -20 "/tmp/serve_$p.log"; kill $pid; return 1; }
import sys, time, urllib.request
for _ in range(240):
    try:
        if urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/readyz", timeout=1).status == 200: sys.exit(0)
    except Exception: time.sleep(0.5)
sys.exit(1)
PY
  taskset -c "${LG_CPUS:-2,3}" python3 -m rightsize loadtest http://127.0.0.1:$port --rate 10 --duration "${DUR:-25}" --warmup-s 3 --json \
    > "$OUT/loadtest_$p.json"
  echo "loadtest $p rc=$?"; head -c 1500 "$OUT/loadtest_$p.json"; echo
  kill -INT $pid; wait $pid; tail -3 "/tmp/serve_$p.log"
}
export -f serve_check; export OUT DUR SRV_CPUS LG_CPUS
step 75 bash -c "serve_check bf16"
step 75 bash -c "serve_check int8"
[ -n "${ONLY_SERVE:-}" ] && exit 0
# 2. rightsize bench sweeps on the host CPU (each step keeps what it stored if its cap stops it)
step 150 python3 -m rightsize bench benchmarks/gpu/host/distilbert.yaml --store "$STORE"
# 3. Llama 1B bf16 steps on one core (the llama-1b-int8-assistant plan's c7i.large); building 1.1B random weights on
#    one thread took the whole of a 45 s cap on 2026-11-27
OMP_NUM_THREADS=1 step 120 taskset -c 4 python3 benchmarks/gpu/llm_steps.py --device cpu --models llama-1b \
  --precision bf16 --batches 1,4 --prompts 256 --context 384 --steps 4 --out "$OUT/llm_cpu_1t.json"
step 150 python3 -m rightsize bench benchmarks/gpu/host/bert-base.yaml --store "$STORE"
step 70 python3 -m rightsize bench benchmarks/gpu/host/resnet50.yaml --store "$STORE"
step 30 python3 benchmarks/gpu/export.py "$STORE" "$OUT/measurements.json" --device cpu --date "$(date +%F)"
# 4. the CUDA paths' own tests (the GPU itself)
[ -n "${NO_GPU_TESTS:-}" ] || step 90 python3 -m pytest -m gpu -q -p no:cacheprovider tests/serve/test_gpu.py \
  tests/measure/test_memory.py
echo "=== done in $(( $(date +%s) - T0 ))s"
