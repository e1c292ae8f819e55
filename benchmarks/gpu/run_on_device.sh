#!/usr/bin/env bash
# The GPU calibration run: one short script for a lent GPU machine (no registry there).
#   bash benchmarks/gpu/run_on_device.sh OUTDIR          # the full sweep (~6 min on an H200)
#   bash benchmarks/gpu/run_on_device.sh OUTDIR short    # batches 1, 8, 64, 256 only (~4 min)
#   bash benchmarks/gpu/run_on_device.sh OUTDIR power    # ResNet-50 and BERT-base, fp32 and bf16: power readings (~2 min)
# Needs the wheels in .whl/ (pydantic, typer, fastapi, ... for Python 3.12; see docs/gpu-calibration.md).
# Each step has its own time cap and runs whatever the step before did: a failure costs one step.
set -u
OUT=${1:?usage: run_on_device.sh OUTDIR [short]}
MODE=${2:-full}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/log.txt") 2>&1
export PYTHONUNBUFFERED=1 TRANSFORMERS_VERBOSITY=error HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  || echo "WHEELS FAILED"
export PYTHONPATH="$PWD/src:/tmp/site"
T0=$(date +%s)
step() { local cap=$1; shift; echo "=== [$(( $(date +%s) - T0 ))s] $* (cap ${cap}s)"; timeout "$cap" "$@"; echo "=== rc=$?"; }
# The host's dispatch speed just before a step (benchmarks/gpu/host_probe.py), into OUTDIR/host_probe.jsonl
probe() { timeout 20 python3 benchmarks/gpu/host_probe.py --label "$1" --out "$OUT/host_probe.jsonl"; }
{
  nvidia-smi -q | head -60; nvidia-smi; lscpu | head -20; free -g
  python3 -c "import torch, transformers, pydantic, typer; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'transformers', transformers.__version__, 'pydantic', pydantic.__version__, 'typer', typer.__version__, torch.cuda.get_device_name(0))"
  python3 -c "import torch; print('cudnn.allow_tf32', torch.backends.cudnn.allow_tf32, 'matmul.allow_tf32', torch.backends.cuda.matmul.allow_tf32)"
  python3 -c "import pynvml; pynvml.nvmlInit(); h=pynvml.nvmlDeviceGetHandleByIndex(0); print('nvml energy mJ', pynvml.nvmlDeviceGetTotalEnergyConsumption(h), 'power limit W', pynvml.nvmlDeviceGetEnforcedPowerLimit(h)/1000)"
} > "$OUT/env.txt" 2>&1
tail -5 "$OUT/env.txt"
STORE="$OUT/gpu.sqlite"
SPECS=benchmarks/gpu
LLM_MODELS=llama-7b,llama-1b,gpt2
if [ "$MODE" = short ]; then  # fewer batches; the LLM models in the other order, GPT-2 twice (does the host drift?)
  SPECS=/tmp/gpu-specs; mkdir -p $SPECS
  for f in benchmarks/gpu/*.yaml; do
    sed 's/^batch_sizes: \[1, 2, 4, 8, 16, 32, 64, 128, 256\]/batch_sizes: [1, 8, 64, 256]/' "$f" > "$SPECS/$(basename "$f")"
  done
  LLM_MODELS=gpt2,llama-1b,llama-7b,gpt2
fi
if [ "$MODE" = power ]; then  # each config's power over a window of >= 1 s (measure/power.py)
  SPECS=/tmp/gpu-specs; mkdir -p $SPECS
  for f in resnet50 bert-base resnet50-train bert-train; do
    sed -e 's/^batch_sizes: \[1, 2, 4, 8, 16, 32, 64, 128, 256\]/batch_sizes: [1, 64, 256]/' \
        -e 's/^precisions: \[fp32, fp16, bf16\]/precisions: [fp32, bf16]/' benchmarks/gpu/$f.yaml > $SPECS/$f.yaml
  done
  for f in resnet50 bert-base resnet50-train bert-train; do step 38 python3 -m rightsize bench $SPECS/$f.yaml --store "$STORE"; done
  echo "=== done in $(( $(date +%s) - T0 ))s"; exit 0
fi
probe llm_steps; step 130 python3 benchmarks/gpu/llm_steps.py --models $LLM_MODELS --out "$OUT/llm_steps.json"
probe resnet50; step 100 python3 -m rightsize bench $SPECS/resnet50.yaml --store "$STORE"
probe bert-base; step 100 python3 -m rightsize bench $SPECS/bert-base.yaml --store "$STORE"
probe bert-train; step 35 python3 -m rightsize bench $SPECS/bert-train.yaml --store "$STORE"
probe resnet50-train; step 35 python3 -m rightsize bench $SPECS/resnet50-train.yaml --store "$STORE"
[ "$MODE" = short ] || step 90 python3 -m pytest -m gpu -q -p no:cacheprovider tests/serve/test_gpu.py tests/measure/test_memory.py
probe small; step 40 python3 -m rightsize bench $SPECS/small.yaml --store "$STORE"
probe mobilenet; step 45 python3 -m rightsize bench $SPECS/mobilenet.yaml --store "$STORE"
probe end; echo "=== done in $(( $(date +%s) - T0 ))s"
