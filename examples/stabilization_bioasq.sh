#!/usr/bin/env bash
# Fine-tuning stabilization on BioASQ (Tinn et al., seed 001, Table 4): standard fine-tuning
# against freezing the lower layers, layerwise learning-rate decay and re-initialising the top
# layer, each with 5 seeds; dev accuracy as mean ± sd, rendered by `mtbio report`.
#
#   OMP_NUM_THREADS=1 bash examples/stabilization_bioasq.sh
#
# writes runs/stabilization-bioasq/{standard,freeze,layerwise-decay,reinit}/bioasq/seed-<s>/ and
# examples/stabilization_bioasq.md (+ .csv). Every setting below can be overridden from the
# environment; tests/test_examples.py runs this script in a tiny mode (tiny encoder, demo data).
set -euo pipefail

TASK=${TASK:-bioasq}
DATA_DIR=${DATA_DIR:-../shared/data}
ENCODER=${ENCODER:-minilm}                     # the packaged MiniLM-L6 (6 layers)
SEEDS=${SEEDS:-5}
OUT=${OUT:-runs/stabilization-bioasq}
REPORT=${REPORT:-examples/stabilization_bioasq.md}
FREEZE=${FREEZE:-3}                            # embeddings + the lowest 3 layers
DECAY=${DECAY:-0.8}                            # layer l of L at lr * 0.8^(L-l)
REINIT=${REINIT:-1}                            # the top layer
TRAIN_ARGS=${TRAIN_ARGS:---max-length 128 --epochs 2}
MTBIO=${MTBIO:-mtbio}

read -r -a train_args <<< "$TRAIN_ARGS"
common=(--task "$TASK" --data-dir "$DATA_DIR" --encoder "$ENCODER" --seeds "$SEEDS" "${train_args[@]}")
variants=(
  "standard|"
  "freeze|--freeze-layers $FREEZE"
  "layerwise-decay|--layerwise-lr-decay $DECAY"
  "reinit|--reinit-layers $REINIT"
)
labels=()
dirs=()
commands=()
for variant in "${variants[@]}"; do
  name=${variant%%|*}
  read -r -a extra <<< "${variant#*|}"
  cmd=("$MTBIO" finetune "${common[@]}" "${extra[@]}" --output "$OUT/$name")
  commands+=("${cmd[*]}")
  start=$(date +%s)
  "${cmd[@]}"
  echo "$name: $(( $(date +%s) - start )) s"
  labels+=(--label "$name")
  dirs+=("$OUT/$name")
done

report_cmd=("$MTBIO" report "${dirs[@]}" "${labels[@]}" --split dev --output "$OUT/report.md" --csv "${REPORT%.md}.csv")
"${report_cmd[@]}"
{
  echo "# Fine-tuning stabilization on $TASK (dev, $SEEDS seeds)"
  echo
  echo "Made by \`examples/stabilization_bioasq.sh\`, which ran:"
  echo
  echo '```bash'
  printf '%s\n' "${commands[@]}" "${report_cmd[*]}"
  echo '```'
  echo
  cat "$OUT/report.md"
} > "$REPORT"
echo "written: $REPORT"
