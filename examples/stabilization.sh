#!/usr/bin/env bash
# Fine-tuning stabilization (Tinn et al., seed 001): standard fine-tuning against freezing the lower
# layers, layerwise learning-rate decay and re-initialising the top layer, SEEDS seeds each, on one
# small task at one learning rate; dev picks each run's best epoch, test is scored once with it.
# Tables (dev and test, each with the task's trivial score and every remedy's per-seed Δ against
# standard fine-tuning, judged as `mtbio pairwise` judges edges) are written by `mtbio report`.
#
#   TASK=mqp LR=2e-4 EPOCHS=5 bash examples/stabilization.sh          # resumes: finished seeds are kept
#
# The run directory is examples/stabilization/<task>-lr<lr>/ itself: finished runs' small files
# (results.json, config.yaml, metrics.jsonl, tasks/) are committed, folded into examples/stabilization/cells.jsonl
# (`mtbio sweep pack examples/stabilization --remove`; a run kept there is kept by --resume), weights are ignored by
# git (examples/.gitignore). The committed study (examples/stabilization.md) ran this script for bioasq,
# mqp and mediqa-rqe at several learning rates. tests/test_examples.py runs it in a tiny mode.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
TASK=${TASK:-mqp}
LR=${LR:-2e-4}
EPOCHS=${EPOCHS:-5}
DATA_DIR=${DATA_DIR:-../shared/data}
ENCODER=${ENCODER:-minilm}                     # the packaged MiniLM-L6 (6 layers)
SEEDS=${SEEDS:-5}
OUT=${OUT:-$HERE/stabilization/$TASK-lr$LR}
FREEZE=${FREEZE:-3}                            # embeddings + the lowest 3 layers
DECAY=${DECAY:-0.8}                            # layer l of L at lr * 0.8^(L-l)
REINIT=${REINIT:-1}                            # the top layer
TRAIN_ARGS=${TRAIN_ARGS:---mixed-precision bf16 --eval-test}
SPLITS=${SPLITS:-dev test}                     # tables to write (test needs --eval-test in TRAIN_ARGS)
PARALLEL=${PARALLEL:-1}                        # variants trained at once (on a GPU, say 4)
MTBIO=${MTBIO:-mtbio}

read -r -a train_args <<< "$TRAIN_ARGS"
common=(--task "$TASK" --data-dir "$DATA_DIR" --encoder "$ENCODER" --seeds "$SEEDS" --lr "$LR" --epochs "$EPOCHS"
        "${train_args[@]}" --resume)
variants=(
  "standard|"
  "freeze|--freeze-layers $FREEZE"
  "layerwise-decay|--layerwise-lr-decay $DECAY"
  "reinit|--reinit-layers $REINIT"
)
mkdir -p "$OUT"
labels=() dirs=() commands=() pids=()
for variant in "${variants[@]}"; do
  name=${variant%%|*}
  read -r -a extra <<< "${variant#*|}"
  cmd=("$MTBIO" finetune "${common[@]}" "${extra[@]}" --output "$OUT/$name")
  commands+=("${cmd[*]}")
  labels+=(--label "$name")
  dirs+=("$OUT/$name")
  if [ "$PARALLEL" -gt 1 ]; then
    while [ "$(jobs -rp | wc -l)" -ge "$PARALLEL" ]; do sleep 1; done
    { start=$(date +%s)
      if ! "${cmd[@]}" > "$OUT/$name.log" 2>&1; then
        echo "$name failed ($OUT/$name.log):" >&2; tail -n 3 "$OUT/$name.log" >&2; exit 1
      fi
      echo "$name: $(( $(date +%s) - start )) s"; } &
    pids+=($!)
  else
    start=$(date +%s)
    "${cmd[@]}"
    echo "$name: $(( $(date +%s) - start )) s"
  fi
done
for pid in "${pids[@]}"; do wait "$pid"; done

{
  echo "Made by \`examples/stabilization.sh\`, which ran:"
  echo
  echo '```bash'
  printf '%s\n' "${commands[@]}"
  for split in $SPLITS; do
    report_cmd=("$MTBIO" report "${dirs[@]}" "${labels[@]}" --split "$split" --trivial --data-dir "$DATA_DIR"
                --compare-to standard --compare-each --output "$OUT/table-$split.md")
    "${report_cmd[@]}" > /dev/null
    echo "${report_cmd[*]}"
  done
  echo '```'
} > "$OUT/commands.md"
for split in $SPLITS; do cat "$OUT/table-$split.md"; done
echo "written: $OUT/table-{${SPLITS// /,}}.md and $OUT/commands.md"
