#!/usr/bin/env bash
# How should `mtbio select` train a target with its partners? (examples/select_biomedical.md, last section.)
# Three arms on the target's dev split, every run STEPS optimizer steps: the target alone; one joint run with the
# ratio mixer (the target as main task, select's group cell); refine on the pair, then fine-tune the target from
# it (seed 004's MT-Fine-Tune). Seeds 42-44 by default; a rerun skips finished runs; the table compares each arm
# with the target alone (dev, Holm over the two; table-dev.md) and the two arms with each other (table-dev-arms.md).
#
#   bash examples/select_training.sh         # writes examples/select_training/ and its table-dev.md
#
# tests/test_examples.py runs this script in a tiny mode.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
TARGET=${TARGET:-ncbi-disease}
PARTNER=${PARTNER:-bc5cdr-disease}
TARGET_EXAMPLES=${TARGET_EXAMPLES:-200}
STEPS=${STEPS:-210}
SEEDS=${SEEDS:-42 43 44}
DATA_DIR=${DATA_DIR:-../shared/data}
ENCODER=${ENCODER:-minilm}
RECIPE=${RECIPE:-minilm}
TRAIN_ARGS=${TRAIN_ARGS:---max-train-examples 2000 --mixed-precision no --eval-every 1000000}
OUT=${OUT:-$HERE/select_training}
MTBIO=${MTBIO:-mtbio}

read -r -a train_args <<< "$TRAIN_ARGS"
common=(--data-dir "$DATA_DIR" --recipe "$RECIPE" --task-examples "$TARGET=$TARGET_EXAMPLES"
        --max-steps "$STEPS" "${train_args[@]}" --resume)
kept() {  # RUN: finished, as its folder under OUT or its line of OUT/cells.jsonl (`mtbio sweep pack OUT --remove`)
  [ -f "$OUT/$1/results.json" ] || grep -qF "{\"cell\": \"$1\"," "$OUT/cells.jsonl" 2>/dev/null
}
for seed in $SEEDS; do
  kept "alone/seed-$seed/$TARGET" || \
    "$MTBIO" finetune --task "$TARGET" --encoder "$ENCODER" --seed "$seed" "${common[@]}" --output "$OUT/alone/seed-$seed"
  kept "ratio/seed-$seed" || \
    "$MTBIO" refine --tasks "$TARGET,$PARTNER" --mixer ratio --main-task "$TARGET" --encoder "$ENCODER" --seed "$seed" \
        "${common[@]}" \
        --output "$OUT/ratio/seed-$seed"
  if ! kept "refine-finetune/seed-$seed/$TARGET"; then
    [ -f "$OUT/pair/seed-$seed/results.json" ] || \
      "$MTBIO" refine --tasks "$TARGET,$PARTNER" --encoder "$ENCODER" --seed "$seed" "${common[@]}" \
          --output "$OUT/pair/seed-$seed"
    "$MTBIO" finetune --task "$TARGET" --from "$OUT/pair/seed-$seed" --seed "$seed" "${common[@]}" \
        --output "$OUT/refine-finetune/seed-$seed"
  fi
done
"$MTBIO" report "$OUT/alone" "$OUT/ratio" "$OUT/refine-finetune" --label alone --label ratio \
    --label refine-finetune --split dev --trivial --data-dir "$DATA_DIR" --compare-to alone --compare-each \
    --output "$OUT/table-dev.md"
"$MTBIO" report "$OUT/ratio" "$OUT/refine-finetune" --label ratio --label refine-finetune --split dev \
    --compare-to ratio --output "$OUT/table-dev-arms.md"
