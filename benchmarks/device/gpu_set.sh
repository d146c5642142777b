#!/bin/bash
# Issue 94's GPU set in one call, from the repository root:
#     bash benchmarks/device/gpu_set.sh --budget-s 540
# On a lent machine without mtbio's dependencies, carry .devrun/ (built here by benchmarks/device/pack.sh: wheels,
# the MiniLM, BC5CDR-chem, DDI and ChemProt); with mtbio installed and MTBIO_DATA_DIR set, nothing more is needed.
# The steps, in this order (each in its own folder of results, skipped when too little of the budget is left,
# stopped at the budget's end with what it had written so far):
#   device        the device's name and its fp32/bf16 matmul peaks (gpu_info.py)
#   fixed-b256    bench_train.py, a BERT-base-sized random encoder, every text 128 tokens, bf16, batch 256:
#   fixed-b512    mtbio and the Trainer, eager and compiled (--compiled-too); steady_fraction_of_peak per side
#   profile       profile_step.py on the compiled batch-512 case: top ops by device time, wall and host time per
#                 step, gaps between kernels
#   whole-minilm  bench_train.py on BC5CDR-chem and DDI, whole runs, the packaged MiniLM, bf16, dev scores beside
#   sweep         bench_sweep.py: a one-seed pairwise sweep of MiniLM cells, --parallel 1 against --parallel N on
#                 the one device: aggregate examples/s and sampled utilisation
#   whole-bert    the whole runs with the BERT-base-sized encoder
# Options: --budget-s S (all of it, 540 by default; 25 s of it are kept for the summary), --only STEP,STEP,
# --parallel N (the sweep's cells at a time, 4); the sizes from the environment: FIXED_N (8192 texts of 128
# tokens), BATCHES ("256 512"), SWEEP_TASKS (bc5cdr-chem,ddi,chemprot: 6 cells), SWEEP_N (2000 examples a task);
# --dry-run (the same steps on the CPU at tiny sizes, whole-bert left out: a tiny random encoder, the sample
# tasks, one batch size, a step or two, compilation off through TORCHDYNAMO_DISABLE; the GPU-only figures say
# "no CUDA device"; about 2 minutes of one core, most of it 17 Python processes starting).
# Writes to $OUT (/tmp/gpu_set when unset): gpu_set.json (the device, its peak, every step's status and files with
# their headline figures: benchmarks/device/gpu_summary.py), gpu_set.tgz (every JSON, results/STEP/*.json, and
# every log) and gpu_set.log (this script's output); the device tool brings back at most 8 files, so the JSON
# files travel in the archive.
set -u
BUDGET=540 DRY= ONLY= PARALLEL=
while [ $# -gt 0 ]; do
  case $1 in
    --budget-s) BUDGET=$2; shift 2 ;;
    --dry-run) DRY=1; shift ;;
    --only) ONLY=$2; shift 2 ;;
    --parallel) PARALLEL=$2; shift 2 ;;
    *) echo "usage: gpu_set.sh [--budget-s S] [--dry-run] [--only STEP,STEP] [--parallel N]" >&2; exit 2 ;;
  esac
done
T0=$(date +%s)
END=$((T0 + BUDGET - 25))  # the summary and the archive need a few seconds
OUT=${OUT:-/tmp/gpu_set}
R=$OUT/results L=$OUT/logs STEPS=$OUT/steps.tsv
rm -rf "$R" "$L" "$STEPS" "$OUT/gpu_set.tgz"; mkdir -p "$R" "$L"
exec > >(tee "$OUT/gpu_set.log") 2>&1
PY=${PYTHON:-python3}
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1
finish() {
  trap - TERM INT
  $PY benchmarks/device/gpu_summary.py "$R" "$STEPS" "$OUT/gpu_set.json"
  tar czf "$OUT/gpu_set.tgz" -C "$OUT" results logs steps.tsv && rm -rf "$R" "$L" "$STEPS" "$OUT/work"
  echo "gpu_set: $(( $(date +%s) - T0 )) s of a ${BUDGET} s budget; $OUT/gpu_set.json, $OUT/gpu_set.tgz"
}
trap 'finish; exit 130' TERM INT

if [ -n "$DRY" ]; then
  W=$OUT/work; rm -rf "$W"; mkdir -p "$W"
  export CUDA_VISIBLE_DEVICES="" TORCHDYNAMO_DISABLE=1 OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
  S=mtbio/sample_data
  BIG=(--encoder "$W/tiny") SMALL=(--encoder "$W/tiny") DATA=(--data-dir $S --task-defs $S/task_defs)
  LEN=16 FIXED_N=8 BATCHES="4" TASKS=demo-ner SWEEP_TASKS=demo-ner,demo-relation SWEEP_N=8 PEAK_S=0.1
  PROFILE=(--warm-steps 1 --steps 1) WHOLE=(--max-train-examples 8) SWEEP_EXTRA=(-- --min-steps 1 --no-lp-ft
  --no-baselines) PARALLEL=${PARALLEL:-2} SCALE=0 INFO=(--dry-run --tiny-encoder "$W/tiny")
else
  if [ -d .devrun ]; then  # a lent machine: mtbio's missing dependencies, the encoder and the data, carried
    $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
      .devrun/whl/*.whl || exit 1
    export PYTHONPATH=/tmp/site:$PWD MTBIO_DATA_DIR=/tmp/gpu-data
    $PY benchmarks/device/encoder.py unpack .devrun/enc /tmp/enc /tmp/site || exit 1
    mkdir -p /tmp/gpu-data && cp -r .devrun/data/. /tmp/gpu-data/ && tar xJf .devrun/gpu-data.tar.xz -C /tmp/gpu-data
  fi
  BIG=(--encoder bert-base-random) SMALL=() DATA=(--data-dir "${MTBIO_DATA_DIR:-../shared/data}")
  LEN=128 FIXED_N=${FIXED_N:-8192} BATCHES=${BATCHES:-"256 512"} TASKS=bc5cdr-chem,ddi
  SWEEP_TASKS=${SWEEP_TASKS:-bc5cdr-chem,ddi,chemprot} SWEEP_N=${SWEEP_N:-2000}
  PEAK_S=2 PROFILE=(--warm-steps 5 --steps 5) WHOLE=() SWEEP_EXTRA=() PARALLEL=${PARALLEL:-4} SCALE=1 INFO=()
fi
echo "gpu_set: budget ${BUDGET} s${DRY:+, dry run}; bootstrapped in $(( $(date +%s) - T0 )) s"

# step NAME SECONDS PYTHON SCRIPT ARGS...: the script with --results-dir $R/NAME first, unless --only leaves NAME
# out or fewer than SECONDS (none in a dry run) are left; stopped at the budget's end
step() {
  local name=$1 need=$(($2 * SCALE)) left started rc status
  shift 2
  if [ -n "$ONLY" ] && [[ ",device,$ONLY," != *",$name,"* ]]; then return; fi
  left=$((END - $(date +%s)))
  if [ $left -lt $((need > 1 ? need : 1)) ]; then
    printf '%s\tskipped\t0\t%s s of the budget left, %s wanted\n' "$name" $left $need >> "$STEPS"
    echo "$name: skipped ($left s left)"; return
  fi
  mkdir -p "$R/$name"; started=$(date +%s)
  timeout -k 10 $left "$1" "$2" --results-dir "$R/$name" "${@:3}" > "$L/$name.log" 2>&1
  rc=$?
  case $rc in 0) status=done ;; 124|137) status="stopped at the budget" ;; *) status="failed (rc $rc)" ;; esac
  printf '%s\t%s\t%s\n' "$name" "$status" $(( $(date +%s) - started )) >> "$STEPS"
  echo "$name: $status in $(( $(date +%s) - started )) s"; tail -n 2 "$L/$name.log"
}

step device 10 $PY benchmarks/device/gpu_info.py --peak-seconds $PEAK_S "${INFO[@]}"
PREC=$(tail -n 1 "$L/device.log" 2>/dev/null)
[ "$PREC" = bf16 ] || [ "$PREC" = no ] || PREC=bf16
for b in $BATCHES; do
  step fixed-b$b 120 $PY benchmarks/bench_train.py "${BIG[@]}" --fixed-length $LEN --max-train-examples $FIXED_N \
    --batch-size $b --compiled-too --precisions $PREC --trainer-precisions $PREC --peak-seconds $PEAK_S
done
step profile 60 $PY benchmarks/profile_step.py "${BIG[@]}" --fixed-length $LEN --batch-size ${BATCHES##* } \
  --mixed-precision $PREC --compile "${PROFILE[@]}" --verbose-steps 0 --peak-seconds $PEAK_S
step whole-minilm 60 $PY benchmarks/bench_train.py --tasks $TASKS "${SMALL[@]}" "${DATA[@]}" "${WHOLE[@]}" \
  --precisions $PREC --trainer-precisions $PREC --peak-seconds $PEAK_S
step sweep 90 $PY benchmarks/bench_sweep.py --tasks $SWEEP_TASKS "${SMALL[@]}" "${DATA[@]}" --parallel 1,$PARALLEL \
  --max-train-examples $SWEEP_N --mixed-precision $PREC --peak-seconds $PEAK_S "${SWEEP_EXTRA[@]}"
[ -n "$DRY" ] || step whole-bert 90 $PY benchmarks/bench_train.py --tasks $TASKS "${BIG[@]}" "${DATA[@]}" \
  --precisions $PREC --trainer-precisions $PREC --peak-seconds $PEAK_S
finish
