#!/usr/bin/env bash
# The GPU checks and benchmarks in one run, for a machine with CUDA: the CUDA tests and the
# service's tests (whose servers take the GPU, MT_DEVICE=auto), then the engine and load
# benchmarks in bfloat16. Each step has its own time limit, writes its log to OUTDIR and
# prints the end of it; a step that fails or runs out of time does not stop the next.
#
#     bash bench/gpu_check.sh OUTDIR [SECONDS_PER_LEVEL]
#
# docs/BENCHMARKS.md section 7 gives the figures of such a run.
set -u
out=${1:?usage: bash bench/gpu_check.sh OUTDIR [SECONDS_PER_LEVEL]}
seconds=${2:-15}
py=${PYTHON:-python3}
mkdir -p "$out"
export PYTHONUNBUFFERED=1

step() {  # step NAME LIMIT_S COMMAND...: the command's output to OUTDIR/NAME.log
    local name=$1 limit=$2
    shift 2
    local t0=$SECONDS
    timeout "$limit" "$@" >"$out/$name.log" 2>&1
    local rc=$?
    echo "== $name: rc $rc, $((SECONDS - t0)) s"
    tail -n "${TAIL:-25}" "$out/$name.log"
}

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
"$py" -c 'import torch; print("torch", torch.__version__, torch.cuda.get_device_name(0))'

TAIL=6 step tests 240 "$py" -m pytest -q -p no:cacheprovider -rs \
    tests/test_translator.py tests/test_continuous_decoding.py tests/test_model_decoding.py \
    tests/test_continuous_scheduler.py tests/test_service_continuous.py tests/test_service.py
TAIL=10 step steps 90 "$py" -m bench.continuous_engine_bench --device cuda --dtype bfloat16 \
    --step-sizes 1,4,16,64,128,256 --steps 200
TAIL=6 step continuous_engine 120 "$py" -m bench.continuous_engine_bench --device cuda \
    --dtype bfloat16 --sentences 512 --inflight 64 --repeats 3
step open_loop 240 "$py" -m bench.open_loop_bench --loads 0.5,0.8,1.0 --seconds "$seconds" \
    --capacity-seconds 10 --capacity-clients 64
for scheduler in continuous static; do
    TAIL=12 MT_SCHEDULER=$scheduler step "load_$scheduler" 150 "$py" -m bench.load_bench \
        --device cuda --dtype bfloat16 --concurrency 1,64 --sentences 256 --max-requests 400 \
        --max-seconds 10
done
TAIL=14 step engine 120 "$py" -m bench.engine_bench --device cuda --sentences 128 \
    --reference-sentences 16 --repeats 2
