#!/usr/bin/env bash
# Predicted task-relation graph of one domain (mtbio affinity: one joint run per seed, lookahead
# affinity and gradient cosine), then its check against the measured pairwise graph of
# examples/pairwise.sh at the same scale: the recipe (mtbio/training/recipes/minilm.yml), 2,000 training
# examples per task, bf16, seeds 42-44, but ONE epoch (a third of a cell's schedule) with a
# measurement every 25 steps.
#
#   bash examples/affinity.sh biomedical          # needs examples/pairwise_biomedical/ for the check
#   bash examples/affinity.sh clinical-public
#
# writes examples/affinity_<domain>/ (affinity.json, matrices, predicted graph; per-seed runs'
# weights are ignored by git) and, when the pairwise sweep is there, comparison.json/.png and
# comparison.txt (rank correlations with bootstrap intervals, top-k precision, compute of each side).
# tests/test_examples.py runs this script in a tiny mode.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
DOMAIN=${1:?usage: affinity.sh DOMAIN}
TASKS=${TASKS:-}                                    # a task list instead of the domain's tasks
SEEDS=${SEEDS:-3}                                   # seeds 42, 43, ... (--seed below)
DATA_DIR=${DATA_DIR:-../shared/data}
ENCODER=${ENCODER:-minilm}
RECIPE=${RECIPE:-minilm}
TRAIN_ARGS=${TRAIN_ARGS:---max-train-examples 2000 --mixed-precision bf16 --eval-every 1000000}
AFFINITY_ARGS=${AFFINITY_ARGS:---epochs 1 --affinity-every 25}
OUT=${OUT:-$HERE/affinity_${DOMAIN//-/_}}
PAIRWISE=${PAIRWISE:-$HERE/pairwise_${DOMAIN//-/_}}
MTBIO=${MTBIO:-mtbio}

read -r -a train_args <<< "$TRAIN_ARGS"
read -r -a affinity_args <<< "$AFFINITY_ARGS"
select=(--domain "$DOMAIN")
[ -n "$TASKS" ] && select=(--tasks "$TASKS")

if [ ! -f "$OUT/affinity.json" ]; then
  "$MTBIO" affinity "${select[@]}" --encoder "$ENCODER" --data-dir "$DATA_DIR" --recipe "$RECIPE" \
      "${train_args[@]}" "${affinity_args[@]}" --seed 42 --seeds "$SEEDS" --output "$OUT"
fi
if [ -f "$PAIRWISE/relations.json" ]; then
  "$MTBIO" report "$PAIRWISE" "$OUT" | tee "$OUT/comparison.txt"
else
  echo "no measured graph at $PAIRWISE (run examples/pairwise.sh $DOMAIN): prediction only"
fi
