#!/usr/bin/env bash
# MT-BERT on the BLUE biomedical tasks, seed 004 Table 3 shape for shape: single-task, MT-Refinement and
# MT-Fine-Tune rows, every seed in SEEDS, dev for every choice, test scored once at the end of each run
# (--eval-test; the best-dev weights are the ones scored), then one table per split with each task's
# trivial score and a per-task verdict of MT-Fine-Tune against single-task.
#
#   bash examples/mtbert_biomedical.sh                   # resumes: finished cells are skipped
#
# Cells (one training run each): single-task/seed-S/TASK, refine/seed-S, mt-fine-tune/seed-S/TASK.
# One process trains a row's pending cells of one seed (their start-up shared).
# When a cell finishes, its small files (results.json, config.yaml, metrics.jsonl, tasks/) are copied
# to RESULTS, which is committed (folded into RESULTS/cells.jsonl by `mtbio sweep pack RESULTS --remove`); a
# cell found there, as a folder or a line of that file, is done, on this machine or a new one. The refined
# encoder's weights are not kept there: a seed whose fine-tune cells are unfinished retrains its refine
# cell if its weights are gone. Every setting can be overridden from the environment;
# tests/test_examples.py runs this script in a tiny mode (tiny encoder, demo data, a few steps).
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
TASKS=${TASKS:-chemprot,ddi,bc5cdr-disease,bc5cdr-chem}
SEEDS=${SEEDS:-42 43 44}
DATA_DIR=${DATA_DIR:-../shared/data}
ENCODER=${ENCODER:-minilm}                          # the packaged MiniLM-L6
OUT=${OUT:-runs/mtbert-biomedical}                  # run directories, with weights
RESULTS=${RESULTS:-$HERE/mtbert_biomedical}        # small files of finished cells, committed: the study resumes from them
RECIPE=${RECIPE:-minilm}          # the recipe settled by examples/recipe_search.sh
# the same for every row: 2,000 training examples per task, bf16, dev scored once at the end (the
# recipe's epoch count was chosen on dev by the search)
TRAIN_ARGS=${TRAIN_ARGS:---max-train-examples 2000 --mixed-precision bf16 --eval-every 1000000}
SPLITS=${SPLITS:-dev test}                          # tables to write; test is scored only if listed
PARALLEL=${PARALLEL:-1}                             # seeds trained at once (each gets its share of threads)
MTBIO=${MTBIO:-mtbio}

read -r -a train_args <<< "$TRAIN_ARGS"
common=(--data-dir "$DATA_DIR" --recipe "$RECIPE" "${train_args[@]}" --resume)
[[ " $SPLITS " == *" test "* ]] && common+=(--eval-test)
tasks=${TASKS//,/ }                                 # task names, not aliases: each is a cell

done_cell() {  # CELL: kept in RESULTS, as its folder or as its line of RESULTS/cells.jsonl (`mtbio sweep pack`)
  [ -f "$RESULTS/$1/results.json" ] || grep -qF "{\"cell\": \"$1\"," "$RESULTS/cells.jsonl" 2>/dev/null
}

keep() {  # copy a finished cell's small files to RESULTS
  local cell=$1
  mkdir -p "$RESULTS/$cell/tasks"
  cp "$OUT/$cell/results.json" "$OUT/$cell/config.yaml" "$RESULTS/$cell/"
  [ -f "$OUT/$cell/metrics.jsonl" ] && cp "$OUT/$cell/metrics.jsonl" "$RESULTS/$cell/"
  cp "$OUT/$cell/tasks/"*.yml "$RESULTS/$cell/tasks/"
}

pending_in() {  # ROW SEED: the tasks whose cell ROW/seed-SEED/TASK is not in RESULTS, comma-separated
  local task out=()
  for task in $tasks; do done_cell "$1/seed-$2/$task" || out+=("$task"); done
  local IFS=,; echo "${out[*]}"
}

keep_tasks() {  # ROW SEED TASKS: keep the finished cells of TASKS (all of them unless the process failed)
  local task
  for task in ${3//,/ }; do [ ! -f "$OUT/$1/seed-$2/$task/results.json" ] || keep "$1/seed-$2/$task"; done
}

run_seed() {  # one process per row: a row's tasks share its start-up (imports, encoder, data reading)
  local seed=$1 todo status=0
  todo=$(pending_in single-task "$seed")
  if [ -n "$todo" ]; then
    "$MTBIO" finetune --tasks "$todo" --encoder "$ENCODER" --seed "$seed" "${common[@]}" \
        --output "$OUT/single-task/seed-$seed" || status=$?
    keep_tasks single-task "$seed" "$todo"
    [ $status = 0 ] || return $status
  fi
  todo=$(pending_in mt-fine-tune "$seed")
  if ! done_cell "refine/seed-$seed" || { [ -n "$todo" ] && [ ! -f "$OUT/refine/seed-$seed/encoder/config.json" ]; }; then
    "$MTBIO" refine --tasks "$TASKS" --encoder "$ENCODER" --seed "$seed" "${common[@]}" --output "$OUT/refine/seed-$seed"
    keep "refine/seed-$seed"
  fi
  if [ -n "$todo" ]; then
    # a new head on the refined encoder, as the committed cells were trained (before the refined head
    # became fine-tuning's default start)
    "$MTBIO" finetune --tasks "$todo" --from "$OUT/refine/seed-$seed" --finetune-heads new --seed "$seed" "${common[@]}" \
        --output "$OUT/mt-fine-tune/seed-$seed" || status=$?
    keep_tasks mt-fine-tune "$seed" "$todo"
    [ $status = 0 ] || return $status
  fi
}

running=0
for seed in $SEEDS; do
  if [ "$PARALLEL" -gt 1 ]; then
    run_seed "$seed" > "$OUT.seed-$seed.log" 2>&1 &
    running=$((running + 1))
    if [ $running -ge "$PARALLEL" ]; then wait -n; running=$((running - 1)); fi
  else
    run_seed "$seed"
  fi
done
wait
[ "${TABLES:-1}" = 1 ] || exit 0                     # TABLES=0: cells only (examples/adapters.sh)

for split in $SPLITS; do
  views=(primary)
  [[ " $tasks " == *" ddi "* ]] && views+=(ddi-macro)   # DDI also by macro F1 over its four types
  for view in "${views[@]}"; do
    extra=() suffix=""
    [ "$view" = ddi-macro ] && extra=(--metric ddi=macro_f1) suffix="-ddi-macro"
    "$MTBIO" report "$RESULTS/single-task" "$RESULTS/refine" "$RESULTS/mt-fine-tune" \
        --label single-task --label mt-refinement --label mt-fine-tune --split "$split" "${extra[@]}" \
        --trivial --data-dir "$DATA_DIR" --compare-to single-task --output "$RESULTS/table-$split$suffix.md"
  done
done
