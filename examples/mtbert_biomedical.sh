#!/usr/bin/env bash
# MT-BERT on the BLUE biomedical tasks (Peng et al. 2020, seed 004, Table 3 layout):
#   single-task baselines, multi-task refinement, and fine-tuning each task from the refined encoder,
#   then one table with the three rows on dev.
#
#   bash examples/mtbert_biomedical.sh
#
# Every setting can be overridden from the environment; tests/test_examples.py runs this script in a
# tiny mode (tiny encoder, demo data, a few steps).
set -euo pipefail

TASKS=${TASKS:-chemprot,ddi,bc5cdr}            # bc5cdr = bc5cdr-disease + bc5cdr-chem, as in the paper
DATA_DIR=${DATA_DIR:-../shared/data}
ENCODER=${ENCODER:-minilm}                     # the packaged MiniLM-L6
OUT=${OUT:-runs/mtbert-biomedical}
TRAIN_ARGS=${TRAIN_ARGS:---max-train-examples 2000 --epochs 1}
MTBIO=${MTBIO:-mtbio}

read -r -a train_args <<< "$TRAIN_ARGS"
common=(--tasks "$TASKS" --data-dir "$DATA_DIR" "${train_args[@]}")

"$MTBIO" finetune "${common[@]}" --encoder "$ENCODER" --output "$OUT/single-task"      # lr 5e-5
"$MTBIO" refine "${common[@]}" --encoder "$ENCODER" --output "$OUT/refine"             # lr 5e-5
"$MTBIO" finetune "${common[@]}" --from "$OUT/refine" --output "$OUT/fine-tune"        # lr 1e-5, new heads
"$MTBIO" evaluate "$OUT/single-task" "$OUT/refine" "$OUT/fine-tune" --data-dir "$DATA_DIR" --split dev \
    --output "$OUT/table-dev.json"
