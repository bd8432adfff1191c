#!/usr/bin/env bash
# The one-call GPU lease (docs/gpu.md, "A lease"): everything a lent H200 should check and measure,
# in one command of at most 8 minutes, leaving one report file.
#
#   scripts/gpu/lease.sh pack        here: build the CUDA binaries and pack what travels into
#                                    .gpu/pack.tar.xz (the binaries, the Debian libraries they link
#                                    other than glibc and CUDA's, espeak-ng with its data) and
#                                    .gpu/whl/ (ESPnet 202511 and the modules its benchmark scripts
#                                    import that the GPU machine's image lacks, as cp312 wheels)
#   scripts/gpu/lease.sh run [DIR]   there (the device tool's run, carry [".gpu"]): unpack, run the
#                                    steps below, write DIR/lease_report.md (DIR: $OUT, else /tmp)
#   scripts/gpu/lease.sh dry-run     here, without a GPU (make CUDA=1 cuda-check runs it): the same
#                                    steps with the CUDA build on the CPU at tiny sizes (the GPU
#                                    tests report themselves skipped, but each filter must match a
#                                    test), so that every command, test filter, file and option the
#                                    lease uses is checked before device time is spent on it
#                                    (the decode step without ESPnet's side unless LEASE_ESPNET=1)
#
# The steps, each with a time limit; a step that does not fit in what is left of LEASE_BUDGET
# (470 s) is reported as not run:
#   device        nvidia-smi's GPU list
#   backend_ops   every op on cuda against ref64 (test_backend_ops)
#   train_cuda    three training steps of the tiny models on the GPU against the CPU
#   speech2text   stage 6's decoder on the GPU against the CPU
#   cuda_graph    a small training step captured as a CUDA graph and replayed against the same
#                 ops issued one by one (bit for bit), a second shape's graph, a host wait refused
#   step          scripts/bench/gpu_step: the reference-size Transformer and the LibriSpeech-100
#                 recipe-size model (train_step's ls100) against ESPnet's own modules, FP32 and
#                 bf16-mixed, and the other models ours alone; each of ours once more under the
#                 per-op profiler (its report with the roofline in the report's appendix)
#   attention     the attention ops' rows of the per-op profiler (attention_*, relattn_*, mha_*:
#                 calls, ms, GFLOP/s, share of the step) for the Transformer and the
#                 LibriSpeech-100 E-Branchformer + decoder in FP32, with the fused attention
#                 (cuda/flash.cuh) on and, for comparison, off (ESPNET3_CUDA_FLASH=0)
#   mini_an4      ESPnet's mini_an4 recipe, stages 1-8 on the GPU
#   default_epoch the default recipe (recipes/espeak_fortunes): its data, tokens and statistics,
#                 then one epoch of training.yaml on the GPU, timed, with the host's wait for each
#                 next batch (loaded beside the step, uploaded on a second stream)
#   decode        scripts/bench/decode JOINT=1 on that epoch's model: the joint CTC/attention search
#                 of stage 6 on the GPU at batch_size 1, 16 and 64 against ESPnet's Speech2Text on
#                 the same GPU (one utterance at a time: ESPnet 202511 has no batch decoding), in
#                 utterances per second, and how many hypotheses agree
# Then `scripts/gpu/lease.sh run` prints the report's tables, which go into docs/gpu.md with the date.
set -uo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
MODE=${1:-}
GPU_DIR=.gpu
BUDGET=${LEASE_BUDGET:-470}

# Libraries the GPU machine has itself (glibc, the loader, CUDA's and the driver's): never packed.
host_lib() { grep -qE '/(libc|libm|libdl|librt|libpthread|ld-linux[^/]*|libcuda|libcudart|libcublas[^/]*|libnccl|libnvidia[^/]*)\.so' <<<"$1"; }

pack() {
    set -e
    make -s -j2 CUDA=1 build-cuda/espnet3 build-cuda/espnet3_tests build-cuda/bench/train_step
    local stage
    stage=$(mktemp -d)
    mkdir -p "$stage/bin" "$stage/lib" "$stage/espeak/bin"
    cp build-cuda/espnet3 build-cuda/espnet3_tests build-cuda/bench/train_step "$stage/bin/"
    strip --strip-debug "$stage"/bin/* # the debug sections are most of their size; line numbers stay here
    cp "$(command -v espeak-ng)" "$stage/espeak/bin/"
    cp -r /usr/lib/x86_64-linux-gnu/espeak-ng-data "$stage/espeak/"
    # the recipes speak English: the other languages' dictionaries stay here
    find "$stage/espeak/espeak-ng-data" -maxdepth 1 -name '*_dict' ! -name 'en_dict' -delete
    local lib
    for lib in $(ldd "$stage"/bin/* "$stage"/espeak/bin/* | awk '/=> \//{print $3}' | sort -u); do
        host_lib "$lib" || cp -L "$lib" "$stage/lib/"
    done
    mkdir -p "$GPU_DIR"
    tar -C "$stage" -cJf "$GPU_DIR/pack.tar.xz" .
    rm -rf "$stage"
    scripts/gpu/espnet_wheels.sh "$GPU_DIR/whl"
    set +e
    local size
    size=$(du -sm "$GPU_DIR" | cut -f1)
    echo "lease.sh pack: $GPU_DIR is $size MiB (the device tool carries 64 MiB with the working tree)"
    [ "$size" -lt 60 ] || { echo "lease.sh pack: too large to carry" >&2; return 1; }
}

# ---- the steps ------------------------------------------------------------------------------

REPORT=
STARTED=$SECONDS
declare -a SUMMARY=()

# step NAME LIMIT_SECONDS COMMAND...: runs it with the limit (or what is left of the budget, if
# less), appends its output's tail to the report and a line to the summary.
step() {
    local name=$1 limit=$2
    shift 2
    local left=$((BUDGET - (SECONDS - STARTED)))
    if [ "$left" -lt 10 ]; then
        SUMMARY+=("| $name | not run | the lease's ${BUDGET} s were used up |")
        return
    fi
    [ "$limit" -le "$left" ] || limit=$left
    local t0=$SECONDS log
    log=$(mktemp)
    timeout "$limit" bash -c "$*" >"$log" 2>&1
    local rc=$? took=$((SECONDS - t0)) verdict=passed
    [ $rc -eq 0 ] || verdict="failed (exit $rc)"
    [ $rc -ne 124 ] || verdict="timed out after $limit s"
    SUMMARY+=("| $name | $verdict | $took s |")
    {
        echo "## $name: $verdict ($took s)"
        echo
        echo '```'
        echo "\$ $*"
        tail -n 60 "$log"
        echo '```'
        echo
    } >>"$REPORT.steps"
    rm -f "$log"
}

# The test binary on one filter; fails when the filter matches no test (a renamed test would
# otherwise pass the lease by running nothing) and, on the GPU, when one was skipped (they skip
# themselves without a CUDA device, as they must in the dry run).
run_tests() {
    local tests=$1 filter=$2 out
    out=$("$tests" --filter "$filter" 2>&1)
    local rc=$?
    echo "$out"
    if [ -n "${LEASE_DRY:-}" ]; then
        grep -qE 'Tested: [1-9]|Skipped here: [1-9]' <<<"$out" || { echo "lease.sh: no test matches $filter"; return 1; }
    else
        grep -q 'Tested: [1-9]' <<<"$out" || { echo "lease.sh: no test of $filter ran"; return 1; }
        grep -q 'Skipped here: 0' <<<"$out" || { echo "lease.sh: a test of $filter was skipped on the GPU"; return 1; }
    fi
    return $rc
}
export -f run_tests

run_steps() {
    local bin=$1 tests=$2 train_step=$3 accel=$4 device=$5 dry=$6
    local work
    work=$(mktemp -d)
    cp -r recipes conf "$work/"
    local env="ESPNET3_BIN=$bin ESPNET3_ROOT=$ROOT ESPNET3_NO_TEST_VENV=1"
    if [ -n "$dry" ]; then step device 10 "echo 'dry run: nvidia-smi is not called'"; else step device 10 "nvidia-smi -L"; fi
    step backend_ops 120 "$env run_tests $tests 'backend_ops/*'"
    step train_cuda 120 "$env run_tests $tests 'train_cuda/*'"
    step speech2text 60 "$env run_tests $tests 'speech2text/decodes_on_the_cuda*'"
    step cuda_graph 30 "$env run_tests $tests 'cuda_graph/*'"
    if [ -n "$dry" ]; then
        step step 120 "TRAIN_STEP_BIN=$train_step GPU_STEP_BACKEND=cpu RUNS=1 STEPS=1 WARMUP=0 PRECISIONS=fp32 MODELS=transformer PROFILE=1 PROFILE_DIR=$work/profiles PYTHON=${PYTHON:-python3} scripts/bench/gpu_step"
    else
        step step 240 "TRAIN_STEP_BIN=$train_step RUNS=3 PRECISIONS='fp32 bf16' MODELS='transformer ls100' PROFILE=1 PROFILE_DIR=$work/profiles scripts/bench/gpu_step && TRAIN_STEP_BIN=$train_step RUNS=1 PRECISIONS='fp32 bf16' MODELS='conformer hybrid ebranchformer' ESPNET=0 scripts/bench/gpu_step"
    fi
    # The attention ops under the profiler, fused path on then off (the dry run: the CPU, once).
    local att_runs="transformer:1 transformer:0 ls100:1 ls100:0" att_env="TRAIN_STEP_BACKEND=cuda" att_steps="5 2"
    [ -z "$dry" ] || att_runs="transformer:1" att_env="TRAIN_STEP_BACKEND=cpu TRAIN_STEP_SHAPE=2x100x8" att_steps="1 0"
    step attention 90 "for r in $att_runs; do m=\${r%:*} f=\${r#*:}; echo \"== \$m, ESPNET3_CUDA_FLASH=\$f\"; ESPNET3_CUDA_FLASH=\$f ESPNET3_PROFILE=1 $att_env TRAIN_STEP_PRECISION=fp32 timeout 80 $train_step --model \$m 1 $att_steps 2>&1 >/dev/null | grep -E '^(profile|op |attention_|relattn_|mha_)' | grep . || exit 1; done"
    step mini_an4 60 "cd $work/recipes/mini_an4 && $bin --training_config conf/training.yaml --inference_config conf/inference.yaml --metrics_config conf/metrics.yaml trainer.accelerator=$accel model.device=$device && cat exp/*/inference/RESULTS.md"
    # num_workers 1: the dry run on the CPU loads batches beside the step as the GPU always does.
    local epoch_cfg="recipes/espeak_fortunes/conf/training.yaml"
    local epoch_keys="trainer.max_epochs=1 dataloader.train.iter_factory.num_workers=1"
    local infer_cfg="recipes/espeak_fortunes/conf/inference.yaml" batches="1 16 64" espnet_py=python3 espnet=1
    # A dry run takes the tiny recipe (with an attention decoder, for the joint search): the same
    # stages at a size this machine runs in seconds. ESPnet's side of the decode only with
    # LEASE_ESPNET=1 (ESPnet is no test dependency: scripts/install_espnet_venv.sh).
    [ -z "$dry" ] || epoch_cfg="recipes/espeak_fortunes/conf/training_tiny_hybrid.yaml" \
        infer_cfg="recipes/espeak_fortunes/conf/inference_tiny.yaml" batches="1 4" \
        espnet_py=${ESPNET_PYTHON:-/opt/espnet3-venv/bin/python} espnet=${LEASE_ESPNET:-0}
    step default_epoch 200 "cd $work && $bin --template_dir conf --config $work/$epoch_cfg --stage 1 --stop_stage 3 >/dev/null && /usr/bin/time -f 'epoch wall %e s' $bin --template_dir conf --config $work/$epoch_cfg --stages train $epoch_keys trainer.accelerator=$accel exp_dir=exp/epoch && tail -n 3 exp/epoch/metrics.csv && grep -h 'the step waited' exp/epoch/train.log"
    # (the epoch's config.yaml names its data by absolute paths: the training config was given so)
    step decode 150 "ESPNET3_BIN=$bin INFERENCE_CONFIG=$work/$infer_cfg JOINT=1 BATCH_SIZES='$batches' DEVICE=$device RUNS=1 ESPNET_PYTHON=$espnet_py ESPNET=$espnet scripts/bench/decode exp_dir=$work/exp/epoch"
    {
        echo "# GPU lease report ($(date -u +%Y-%m-%d' '%H:%M' UTC'))${dry:+ (dry run on the CPU)}"
        echo
        echo "| step | result | time |"
        echo "|------|--------|------|"
        printf '%s\n' "${SUMMARY[@]}"
        echo
        cat "$REPORT.steps"
        if [ -d "$work/profiles" ]; then
            echo "## Appendix: profiles"
            for f in "$work"/profiles/*.txt; do
                [ -e "$f" ] || continue
                echo
                echo "### $(basename "$f" .txt)"
                echo '```'
                cat "$f"
                echo '```'
            done
        fi
    } >"$REPORT"
    rm -f "$REPORT.steps"
    rm -rf "$work"
    printf '%s\n' "${SUMMARY[@]}"
    echo "lease.sh: report in $REPORT"
    ! printf '%s\n' "${SUMMARY[@]}" | grep -q "failed\|timed out"
}

case "$MODE" in
pack)
    pack
    ;;
run)
    out=${2:-${OUT:-/tmp}}
    mkdir -p "$out"
    REPORT=$out/lease_report.md
    [ -f "$GPU_DIR/pack.tar.xz" ] || { echo "lease.sh run: no $GPU_DIR/pack.tar.xz (run 'scripts/gpu/lease.sh pack' here first, then carry $GPU_DIR)" >&2; exit 2; }
    dest=/tmp/espnet3_lease
    rm -rf "$dest" && mkdir -p "$dest" && tar -C "$dest" -xJf "$GPU_DIR/pack.tar.xz" || exit 2
    export LD_LIBRARY_PATH=$dest/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    export PATH=$dest/espeak/bin:$PATH ESPEAK_DATA_PATH=$dest/espeak
    if ls "$GPU_DIR"/whl/*.whl >/dev/null 2>&1; then
        python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
            "$GPU_DIR"/whl/*.whl && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
    fi
    run_steps "$dest/bin/espnet3" "$dest/bin/espnet3_tests" "$dest/bin/train_step" gpu cuda ""
    ;;
dry-run)
    out=${2:-$(mktemp -d)}
    mkdir -p "$out" && REPORT=$out/lease_report.md
    make -s -j2 CUDA=1 build-cuda/espnet3 build-cuda/espnet3_tests build-cuda/bench/train_step || exit 2
    export LEASE_DRY=1
    run_steps "$ROOT/build-cuda/espnet3" "$ROOT/build-cuda/espnet3_tests" "$ROOT/build-cuda/bench/train_step" cpu cpu dry
    ;;
*)
    sed -n '2,/^set -uo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2
    exit 2
    ;;
esac
