#!/usr/bin/env bash
# Learning-rate search for the packaged MiniLM-L6 on the four BLUE biomedical tasks (issue 16, item 1).
# One single-task run per (task, lr), dev scored after every epoch, so the epoch count is read off the
# same runs. Finished cells (results.json present) are skipped: rerunning the script resumes it.
#
#   bash examples/recipe_search.sh            # prints the table (examples/recipe_summary.py)
set -euo pipefail

TASKS=${TASKS:-bc5cdr-chem bc5cdr-disease chemprot ddi}
LRS=${LRS:-5e-5 1e-4 2e-4}
DATA_DIR=${DATA_DIR:-../shared/data}
OUT=${OUT:-runs/recipe-search}
TRAIN_ARGS=${TRAIN_ARGS:---max-train-examples 1000 --epochs 3 --batch-size 32 --warmup 0.1 --mixed-precision bf16}
MTBIO=${MTBIO:-mtbio}

read -r -a train_args <<< "$TRAIN_ARGS"
for task in $TASKS; do
  for lr in $LRS; do
    run="$OUT/$task/lr-$lr"
    [ -f "$run/$task/results.json" ] && continue
    "$MTBIO" finetune --task "$task" --data-dir "$DATA_DIR" --lr "$lr" "${train_args[@]}" --seed 42 --resume \
        --output "$run"
  done
done

python "$(dirname "$0")/recipe_summary.py" "$OUT"
