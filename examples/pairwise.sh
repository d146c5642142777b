#!/usr/bin/env bash
# Pairwise task-relation graph of one domain at the Table 3 scale (examples/mtbert_biomedical.md):
# the packaged MiniLM-L6 with the recipe settled on dev (mtbio/training/recipes/minilm.yml), 2,000 training
# examples per task, bf16, dev scored once at the end of each cell, seeds 42, 43, 44.
#
#   bash examples/pairwise.sh biomedical          # resumes: finished cells are skipped
#   bash examples/pairwise.sh clinical-public
#   MAX_SEEDS=8 bash examples/pairwise.sh biomedical   # adaptive: more seeds for undecided edges, up to 8
#
# The sweep directory is examples/pairwise_<domain>/ itself: a finished cell's small files
# (results.json, config.yaml, metrics.jsonl, tasks/) are committed, its weights are ignored by git
# (examples/.gitignore), so a fresh clone resumes from the committed cells. PARALLEL cells train at
# once (`--parallel`, threads divided between them; each cell is claimed with a lock file, so a
# second copy of this script on the same directory shares the work). The sweep ends by writing
# relations.json, the graph and the gain matrix. tests/test_examples.py runs this script in a tiny mode.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
DOMAIN=${1:?usage: pairwise.sh DOMAIN}
TASKS=${TASKS:-}                                    # a task list instead of the domain's tasks
SEEDS=${SEEDS:-42 43 44}
DATA_DIR=${DATA_DIR:-../shared/data}
ENCODER=${ENCODER:-minilm}
RECIPE=${RECIPE:-minilm}
TRAIN_ARGS=${TRAIN_ARGS:---max-train-examples 2000 --mixed-precision bf16 --eval-every 1000000}
OUT=${OUT:-$HERE/pairwise_${DOMAIN//-/_}}
PARALLEL=${PARALLEL:-1}
MTBIO=${MTBIO:-mtbio}
MAX_SEEDS=${MAX_SEEDS:-}                            # adaptive seeds up to this many (--max-seeds)

read -r -a train_args <<< "$TRAIN_ARGS"
read -r -a seeds <<< "$SEEDS"
select=(--domain "$DOMAIN")
[ -n "$TASKS" ] && select=(--tasks "$TASKS")
adaptive=()
[ -n "$MAX_SEEDS" ] && adaptive=(--max-seeds "$MAX_SEEDS")
"$MTBIO" pairwise "${select[@]}" --encoder "$ENCODER" --data-dir "$DATA_DIR" --recipe "$RECIPE" "${train_args[@]}" \
    --output "$OUT" --seed "${seeds[0]}" --seeds "${#seeds[@]}" --parallel "$PARALLEL" "${adaptive[@]}"
