#!/usr/bin/env bash
# The GPU checks and benchmarks in one run, for a machine with CUDA: the engine and load
# benchmarks in bfloat16, then the CUDA tests and the tests that take the machine's own CPU
# (the C extension built there), then the first-call costs. Each step has its own time limit,
# writes its log to OUTDIR and prints the end of it; a step that fails or runs out of time
# does not stop the next.
#
#     bash bench/gpu_check.sh OUTDIR [SECONDS_PER_LEVEL] [SOURCE_SENTENCES]
#     STEPS="tests first_call" bash bench/gpu_check.sh OUTDIR    # only these steps
#
# The steps: cuda_graph steps fixed_steps continuous_engine footprint selection open_loop
# load_continuous load_static load_graphs load_joins tests first_call (fixed_steps, selection, load_graphs and
# load_joins: the continuous decode in fixed buffers replayed from CUDA graphs, MT_CUDA_GRAPHS;
# load_joins with MT_JOIN_EVERY_STEPS=4)
# (all by default). The machine block (the machine, the C kernels' build, the linear backends'
# batch invariance) runs first unless MACHINE=skip: a second run in the same tree can skip it.
# With 10 s per level the whole run took 542 s on an H200 (docs/TESTING.md), without the
# CUDA graph steps (on an H200: cuda_graph 16 s, fixed_steps 58 s, load_graphs 54 s) and the
# fixed decode of continuous_engine (9 s with it).
#
# SOURCE_SENTENCES defaults to the benchmarks' own (../shared/data/tatoeba/dev.en); a machine
# without ../shared needs a copy. docs/BENCHMARKS.md section 7 gives the figures of such a run.
set -u
out=${1:?usage: bash bench/gpu_check.sh OUTDIR [SECONDS_PER_LEVEL] [SOURCE_SENTENCES]}
seconds=${2:-15}
src=()
[ -n "${3:-}" ] && src=(--src "$3")
py=${PYTHON:-python3}
mkdir -p "$out"
export PYTHONUNBUFFERED=1

all_steps="cuda_graph steps fixed_steps continuous_engine footprint selection open_loop"
all_steps+=" load_continuous"
all_steps+=" load_static load_graphs load_joins tests first_call"
wanted=" ${STEPS:-$all_steps} "

step() {  # step NAME LIMIT_S COMMAND...: the command's output to OUTDIR/NAME.log
    local name=$1 limit=$2
    shift 2
    if [[ $wanted != *" $name "* ]]; then
        echo "== $name: not in STEPS"
        return
    fi
    local t0=$SECONDS
    timeout "$limit" "$@" >"$out/$name.log" 2>&1
    local rc=$?
    echo "== $name: rc $rc, $((SECONDS - t0)) s"
    tail -n "${TAIL:-25}" "$out/$name.log"
}

[ "${MACHINE:-}" = skip ] || {
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
    "$py" -c 'import torch; print("torch", torch.__version__, torch.cuda.get_device_name(0))'
    grep -m1 "model name" /proc/cpuinfo
    grep -m1 -o -w -E "avx512f|amx_tile|avx512_bf16|avx512_vnni" /proc/cpuinfo | sort -u | tr '\n' ' '
    echo
    "$py" setup.py -q build_ext --inplace 2>&1 | grep -i -E "error|warning: build" | head -5
    "$py" -c 'from model_core import fused; print("C kernels built:", fused.kernel_available())'
    "$py" -m bench.linear_backend_bench --rounds 5 | tail -n 4  # batch invariance on this CPU
} 2>&1 | tee "$out/machine.log"

TAIL=12 step cuda_graph 90 "$py" -m bench.cuda_graph_bench --device cuda --dtype bfloat16 \
    "${src[@]}" --rows 4,64,256,1024 --positions 256 --written 24
TAIL=18 step steps 120 "$py" -m bench.continuous_engine_bench --device cuda --dtype bfloat16 \
    "${src[@]}" --step-sizes 1,4,16,64,128,256 --steps 200 --profile-steps 50
TAIL=18 step fixed_steps 120 "$py" -m bench.continuous_engine_bench --device cuda \
    --dtype bfloat16 "${src[@]}" --step-sizes 1,4,16,64,128,256 --steps 200 --profile-steps 50 \
    --fixed
TAIL=7 step continuous_engine 120 "$py" -m bench.continuous_engine_bench --device cuda \
    --dtype bfloat16 "${src[@]}" --sentences 512 --inflight 64 --repeats 3 --fixed
# what a continuous decode holds on the GPU (the caching allocator's peak, the CUDA graphs'
# pools too) against what admission counts for it
TAIL=16 step footprint 120 "$py" -m bench.footprint_bench --device cuda --dtype bfloat16
# the fixed decode with the beam selection in its CUDA graph (RunningBatch.capture_selection,
# off in the service): its replay failed on an H200 with an index out of bounds in a gather
TAIL=7 CUDA_LAUNCH_BLOCKING=1 step selection 60 "$py" -m bench.continuous_engine_bench \
    --device cuda --dtype bfloat16 "${src[@]}" --sentences 128 --inflight 64 --repeats 1 --fixed \
    --capture-selection
step open_loop 300 "$py" -m bench.open_loop_bench "${src[@]}" --loads 0.5,0.8,1.0 \
    --seconds "$seconds" --capacity-seconds 10 --capacity-rounds 2 --capacity-clients 64 \
    --warm-seconds 20 --warm-clients 64
# graphs: continuous with MT_CUDA_GRAPHS; joins: that with MT_JOIN_EVERY_STEPS=4
for scheduler in continuous static graphs joins; do
    graphs=false joins=1 sched=continuous
    [ "$scheduler" = static ] && sched=static
    [ "$scheduler" = graphs ] && graphs=true
    [ "$scheduler" = joins ] && graphs=true joins=4
    TAIL=12 MT_SCHEDULER=$sched MT_CUDA_GRAPHS=$graphs \
        MT_JOIN_EVERY_STEPS=$joins \
        step "load_$scheduler" 100 "$py" -m bench.load_bench \
        "${src[@]}" --device cuda --dtype bfloat16 --concurrency 1,64 --sentences 256 \
        --max-requests 400 --max-seconds 8 --warm-requests 512 --warm-concurrency 64 --warm-engine
done
TAIL=12 step tests 200 "$py" -m pytest -q -p no:cacheprovider -rs --durations=8 \
    tests/test_translator.py tests/test_continuous_decoding.py tests/test_linear_backend.py \
    tests/test_model_decoding.py \
    tests/test_fused.py tests/test_service_continuous.py \
    tests/test_service.py::test_deadline_gives_504_and_abandoned_work_is_not_computed \
    tests/test_service.py::test_health_languages_models \
    tests/test_service.py::test_metrics_exposition \
    tests/test_service.py::test_int8_setting_serves_a_quantized_model
TAIL=8 step first_call 60 "$py" -m bench.first_call_bench --device cuda
