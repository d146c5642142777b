#!/usr/bin/env bash
# --select per-task on real data (issue 67): Table 3's four tasks refined jointly on the packaged MiniLM, one run per
# seed with `--select per-task`, which keeps both arms of the comparison from the same training run: the weights of
# the best mean dev evaluation (the default; the run's own encoder/ and heads/) and each task's own best evaluation
# (best/<task>/), each scored on test once. Declared in examples/select_per_task.md before the first cell; the table
# is written by examples/select_per_task.py from the kept cells.
#
#   bash examples/select_per_task.sh      # resumes: a seed whose results are in RESULTS is skipped, an
#                                         # interrupted seed continues from its newest checkpoint
#
# Cells: seed-S/ with the run's results.json, config.yaml, tasks/ and best/<task>/results.json (weights not kept),
# folded into RESULTS/cells.jsonl by `mtbio sweep pack RESULTS --remove` (a seed kept there is skipped too).
# tests/test_examples.py runs this in a tiny mode (tiny encoder, demo data).
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
TASKS=${TASKS:-chemprot,ddi,bc5cdr-disease,bc5cdr-chem}
SEEDS=${SEEDS:-42 43 44}
SIZE=${SIZE:-1000}            # training examples per task
EVAL_EXAMPLES=${EVAL_EXAMPLES:-1000}  # a fixed subset of each dev and test split
EVAL_EVERY=${EVAL_EVERY:-40}  # optimizer steps between dev evaluations: the candidates each arm selects among
DATA_DIR=${DATA_DIR:-../shared/data}
ENCODER=${ENCODER:-minilm}
OUT=${OUT:-runs/select-per-task}
RESULTS=${RESULTS:-$HERE/select_per_task}
TRAIN_ARGS=${TRAIN_ARGS:-}
MTBIO=${MTBIO:-mtbio}

read -r -a extra <<< "$TRAIN_ARGS"
for seed in $SEEDS; do
  cell="seed-$seed"
  [ -f "$RESULTS/$cell/results.json" ] && continue
  grep -qF "{\"cell\": \"$cell\"," "$RESULTS/cells.jsonl" 2>/dev/null && continue  # kept in the study's one file
  run="$OUT/$cell"
  resume=()
  [ -f "$run/config.yaml" ] && resume=(--resume)  # an interrupted run continues from its newest checkpoint
  "$MTBIO" refine --tasks "$TASKS" --encoder "$ENCODER" --data-dir "$DATA_DIR" --seed "$seed" \
      --max-train-examples "$SIZE" --max-eval-examples "$EVAL_EXAMPLES" --eval-every "$EVAL_EVERY" \
      --select per-task --eval-test "${resume[@]}" "${extra[@]}" --output "$run" < /dev/null
  mkdir -p "$RESULTS/$cell/tasks"
  cp "$run/results.json" "$run/config.yaml" "$RESULTS/$cell/"
  cp "$run/tasks/"*.yml "$RESULTS/$cell/tasks/"
  for best in "$run"/best/*/; do
    task=$(basename "$best")
    mkdir -p "$RESULTS/$cell/best/$task"
    cp "$best/results.json" "$RESULTS/$cell/best/$task/"
  done
  rm -rf "${run:?}"  # weights are not kept
done
