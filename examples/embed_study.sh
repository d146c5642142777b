#!/usr/bin/env bash
# The embedding study (issue 89; declared in examples/embed_study.md): four refined starts and the plain encoder,
# each fine-tuned on four held-out targets at 100 and 1,000 examples, three seeds, dev only, every cell beside its
# trivial score and its start's no-training baselines.
#
#   bash examples/embed_study.sh starts      # the refines and the interpolation, one after another (resumable)
#   bash examples/embed_study.sh cells       # the fine-tunes: a transfer sweep from the plain encoder and every
#                                            #   start whose refine has begun (cells from an unfinished one wait);
#                                            #   two processes make two lanes (lock files share the cells); resumes
#
# Weights stay under $RUNS (not committed); the sweep's small files are in examples/embed_study/.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
DATA_DIR=${DATA_DIR:-../shared/data}
RUNS=${RUNS:-runs/embed-study}
OUT=${OUT:-$HERE/embed_study}
MTBIO=${MTBIO:-mtbio}
STARTS=${STARTS:-broad broad-wise broad-mnrl four-task}
TARGETS=${TARGETS:-ncbi-disease,ade,mqp,hoc}
SIZES=${SIZES:-100,1000}
SEEDS=${SEEDS:-3}
ALPHA=${ALPHA:-0.5}
REFINE_ARGS=${REFINE_ARGS:---recipe minilm --max-train-examples 500 --max-eval-examples 500 --evaluations 5 --seed 42}
CELL_ARGS=${CELL_ARGS:---recipe minilm --max-epochs 20 --evaluations 5 --max-eval-examples 500}  # issue 88's cell, the cut: the page
FOUR=chemprot,ddi,bc5cdr
BROAD=bc2gm,bc5cdr-chem,bc5cdr-disease,chemprot,chia,ddi,mediqa-rqe

read -r -a refine_args <<< "$REFINE_ARGS"
read -r -a cell_args <<< "$CELL_ARGS"

refine() {  # $1: start name, $2: tasks
  [ -f "$RUNS/$1/results.json" ] && return 0
  "$MTBIO" refine --tasks "$2" --data-dir "$DATA_DIR" "${refine_args[@]}" --output "$RUNS/$1" --resume < /dev/null
}

case "${1:-}" in
  starts)
    for start in $STARTS; do
      case $start in
        four-task) refine four-task "$FOUR" ;;
        broad) refine broad "$BROAD" ;;
        broad-mnrl) refine broad-mnrl "$BROAD,mediqa-rqe-mnrl" ;;
        broad-wise)
          while [ ! -f "$RUNS/broad/results.json" ]; do sleep 60; done  # the other lane refines broad
          [ -f "$RUNS/broad-wise/results.json" ] || \
            "$MTBIO" merge "$RUNS/broad" --with-start "$ALPHA" --output "$RUNS/broad-wise" < /dev/null ;;
      esac
      mkdir -p "$OUT/starts/$start"  # the start's small files, committed, with its encoder's hash: a session that
      cp "$RUNS/$start/results.json" "$RUNS/$start/config.yaml" "$OUT/starts/$start/" 2>/dev/null || true
      # lost the weights refines again from the same seed, and the hash says whether it got the same encoder
      (cd "$RUNS/$start" && sha256sum encoder/*.safetensors) > "$OUT/starts/$start/encoder.sha256" 2>/dev/null || true
    done ;;
  cells)
    refine_on=()
    for start in $STARTS; do  # the starts the page's cut keeps
      if [ -f "$RUNS/$start/config.yaml" ] || [ -f "$RUNS/$start/results.json" ]; then
        refine_on+=(--refine-on "$RUNS/$start")
      else
        echo "start $start has not begun: its cells join when this command runs again after it has" >&2
      fi
    done
    [ ${#refine_on[@]} -gt 0 ] || { echo "no start has begun: run '$0 starts' first" >&2; exit 2; }
    "$MTBIO" transfer "${refine_on[@]}" --targets "$TARGETS" --sizes "$SIZES" --seeds "$SEEDS" --data-dir "$DATA_DIR" \
        "${cell_args[@]}" --output "$OUT" < /dev/null ;;
  *) echo "usage: $0 starts|cells" >&2; exit 2 ;;
esac
