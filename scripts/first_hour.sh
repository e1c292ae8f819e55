#!/usr/bin/env bash
# A new user's first hour, from the built wheel in a clean venv (CI runs it: `make first-hour`).
#
#   1. build the wheel; install it (core dependencies only, no torch) into a fresh venv
#   2. `--help` of every command; 10 bad invocations: each exit 2, one line, no traceback
#   3. `plan` from a stored profile without torch (the profile is measured by the dev venv first)
#   4. add torch (pinned) and the models/onnx extras; bring your own model in each format:
#      hf: config directory, .onnx, TorchScript .pt, package.module:factory — `memory` and `bench`
#
# Prints one line per check and exits 1 at the first failure. Needs the dev venv (.venv, `make install`).
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
DEV=$ROOT/.venv/bin
WORK=$(mktemp -d "${TMPDIR:-/tmp}/rightsize-first-hour.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
VENV=$WORK/venv
RS=$VENV/bin/rightsize
pass=0
fail() { echo "FAIL: $*"; echo "first hour: $pass checks passed, then a failure (work dir kept: $WORK)"; trap - EXIT; exit 1; }
ok() { pass=$((pass + 1)); echo "ok   $*"; }

# 1. wheel + clean venv, core only
"$DEV/python" -m pip wheel -q --no-deps --no-build-isolation -w "$WORK/dist" . >"$WORK/wheel.log" 2>&1 \
  || fail "building the wheel (see $WORK/wheel.log)"
WHEEL=$(ls "$WORK"/dist/rightsize-*.whl)
python3 -m venv "$VENV" || fail "python3 -m venv"
"$VENV/bin/python" -m pip install -q "$WHEEL" >"$WORK/install.log" 2>&1 || fail "pip install the wheel (see $WORK/install.log)"
"$VENV/bin/python" -c "import torch" 2>/dev/null && fail "the core install pulled torch"
ok "wheel $(basename "$WHEEL") installs into a clean venv without torch"

# 2. help of every command, and usage errors
"$RS" --version >/dev/null || fail "rightsize --version"
commands=$("$VENV/bin/python" - <<'EOF'
import typer.main
from rightsize.cli.app import _register, app
_register()
group = typer.main.get_command(app)
print(" ".join(sorted(group.commands)))
EOF
) || fail "listing the commands"
for cmd in $commands; do
  out=$("$RS" "$cmd" --help 2>&1) || fail "rightsize $cmd --help exited $?"
  echo "$out" | grep -q "Usage" || fail "rightsize $cmd --help printed no usage"
done
ok "--help of every command ($(echo "$commands" | wc -w) commands)"

bad_invocations=(
  ""
  "bogus"
  "plan"
  "plan --nope"
  "plan examples/quick.yaml --top 0"
  "bench /no/such/spec.yaml"
  "memory resnet50 --batch -3"
  "memory resnet5"
  "catalog --provider oracle"
  "memory resnet50 --precision fp64"
  "pipeline /no/such.yaml"
  "serve simplenet --port 99999"
  "results --store /no/such/dir/store.db"
)
n=0
for args in "${bad_invocations[@]}"; do
  # shellcheck disable=SC2086
  "$RS" $args >"$WORK/out" 2>"$WORK/err"
  rc=$?
  [ "$rc" = 2 ] || fail "rightsize $args: exit $rc, expected 2 ($(head -c 300 "$WORK/err"))"
  grep -q "Traceback" "$WORK/err" "$WORK/out" && fail "rightsize $args printed a traceback"
  n=$((n + 1))
done
ok "$n bad invocations: exit 2, no traceback"

# 3. plan from a stored profile without torch
STORE=$WORK/store.db
SPEC=examples/sentiment-api.yaml
"$DEV/rightsize" plan "$SPEC" --store "$STORE" --json >/dev/null 2>"$WORK/dev-plan.log" \
  || fail "measuring $SPEC with the dev venv (see $WORK/dev-plan.log)"
"$RS" plan "$SPEC" --store "$STORE" --json >"$WORK/plan.json" 2>"$WORK/plan.log" \
  || fail "plan without torch: $(tail -c 400 "$WORK/plan.log")"
"$VENV/bin/python" - "$WORK/plan.json" <<'EOF' || fail "plan without torch gave no recommendation"
import json, sys
plan = json.load(open(sys.argv[1]))
rec = plan.get("recommendation") or plan.get("best")
assert rec, sorted(plan)
EOF
"$RS" catalog --json >/dev/null || fail "catalog without torch"
"$RS" report --store "$STORE" --output "$WORK/report.html" >/dev/null 2>"$WORK/report.log" \
  || fail "report without torch: $(tail -c 300 "$WORK/report.log")"
ok "plan, catalog and report from a stored profile without torch"

# 4. bring your own model, four formats (torch + extras now)
TORCH_REQ=$("$DEV/python" -c "import torch; print('torch==' + torch.__version__.split('+')[0])")
"$VENV/bin/python" -m pip install -q "$TORCH_REQ" >"$WORK/torch.log" 2>&1 || fail "pip install $TORCH_REQ"
"$VENV/bin/python" -m pip install -q "$WHEEL[models,onnx]" >"$WORK/extras.log" 2>&1 \
  || fail "pip install the models,onnx extras (see $WORK/extras.log)"
mkdir -p "$WORK/byo/bert"
cat >"$WORK/byo/mymodels.py" <<'EOF'
from torch import nn


def make() -> nn.Module:
    return nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 4))
EOF
cat >"$WORK/byo/bert/config.json" <<'EOF'
{"model_type": "bert", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2,
 "intermediate_size": 128, "vocab_size": 1000, "max_position_embeddings": 128}
EOF
(cd "$WORK/byo" && "$VENV/bin/python" - <<'EOF') >"$WORK/export.log" 2>&1 || fail "exporting the test model"
import warnings
import torch
from mymodels import make
warnings.simplefilter("ignore")
model, x = make().eval(), torch.randn(2, 64)
torch.jit.save(torch.jit.trace(model, x), "mlp.pt")
torch.onnx.export(model, (x,), "mlp.onnx", dynamo=True, dynamic_shapes=({0: torch.export.Dim("batch")},))
EOF
for fmt in "hf:bert|seq_len: 16|--seq 16" "mlp.onnx|shape: [64]|--shape 64" \
           "mlp.pt|shape: [64]|--shape 64" "mymodels:make|shape: [64]|--shape 64"; do
  IFS='|' read -r ref inp flag <<<"$fmt"
  printf 'name: byo\nmodel: "%s"\ninput: {%s}\nbatch_sizes: [1, 4]\ntiming: {max_time_s: 1}\n' "$ref" "$inp" \
    >"$WORK/byo/spec.yaml"
  # shellcheck disable=SC2086
  (cd "$WORK/byo" && PYTHONPATH=. "$RS" memory "$ref" --device cpu $flag --json) >"$WORK/mem.json" 2>"$WORK/mem.log" \
    || fail "memory $ref: $(tail -c 400 "$WORK/mem.log")"
  (cd "$WORK/byo" && PYTHONPATH=. "$RS" bench spec.yaml --store "$WORK/byo.db" --json) >"$WORK/bench.json" \
    2>"$WORK/bench.log" || fail "bench $ref: $(tail -c 400 "$WORK/bench.log")"
  "$VENV/bin/python" - "$WORK/bench.json" <<'EOF' || fail "bench $ref: not every config ok"
import json, sys
rows = json.load(open(sys.argv[1]))
rows = rows if isinstance(rows, list) else rows["measurements"]
assert rows and all(r["status"] == "ok" and r["flops_per_sample"] > 0 for r in rows), rows
EOF
  ok "your own model: $ref (memory + bench)"
done
echo "first hour: all $pass checks passed"
