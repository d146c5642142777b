#!/usr/bin/env bash
# Which tasks should a new, small task train with? (issue 31's small-data study.) Each target is capped at
# TARGET_EXAMPLES training examples (--task-examples) while the candidates keep the study's 2,000, as a
# researcher's new dataset beside mtbio's shipped tasks. `mtbio select` ranks the candidates with PREDICTOR
# (the best measured within target, examples/predictor_validation.md), verifies the TOP best as pairs with the
# target, then trains the target with the verified helpful partners and with every candidate (GROUP_TRAINING: the
# study ran the ratio mixer, the target as main task, before select's default became refine-finetune), against the
# target alone: three seeds, dev scored once at the end of each cell (the
# partners chosen on it), test scored once per cell for the final comparison, verdicts by the shared rule, all in
# fp32. The targets (NCBI-disease tagging, HoC multi-label, MQP question pairs) are in
# no committed graph; the candidates are the biomedical graph's four tasks (relations and NER). The study's
# design was declared in examples/select_biomedical.md before its first cell ran. Every arm trains the same number
# of optimizer steps (select's --matched-steps, 210 here): the study's follow-up, in examples/select_biomedical_steps/.
# Its first run gave each cell its recipe epochs (TRAIN_ARGS="... --no-matched-steps", OUT=examples/select_biomedical).
#
#   bash examples/select.sh          # resumes: finished cells are skipped
#   PREDICTION_FROM=examples/select_biomedical OUT=... bash examples/select.sh   # the ranking read back from there
#
# Each target's sweep directory is $OUT/<target>/ (select.json, select.md, the cells' small files; weights are
# ignored by git); `python examples/select_summary.py $OUT` tables them. tests/test_examples.py runs this script
# in a tiny mode.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
TARGETS=${TARGETS:-ncbi-disease hoc mqp}
CANDIDATES=${CANDIDATES:-chemprot,ddi,bc5cdr-chem,bc5cdr-disease}
TARGET_EXAMPLES=${TARGET_EXAMPLES:-200}
PREDICTOR=${PREDICTOR:-lookahead}
TOP=${TOP:-2}
SEEDS=${SEEDS:-3}
DATA_DIR=${DATA_DIR:-../shared/data}
ENCODER=${ENCODER:-minilm}
RECIPE=${RECIPE:-minilm}
TRAIN_ARGS=${TRAIN_ARGS:---max-train-examples 2000 --mixed-precision no --eval-every 1000000 --eval-test}
PREDICTOR_ARGS=${PREDICTOR_ARGS---affinity-every 25}  # empty: none (a predictor without a probe)
OUT=${OUT:-$HERE/select_biomedical_steps}
PARALLEL=${PARALLEL:-1}
GROUP_TRAINING=${GROUP_TRAINING:-ratio}
MTBIO=${MTBIO:-mtbio}

read -r -a train_args <<< "$TRAIN_ARGS"
read -r -a predictor_args <<< "$PREDICTOR_ARGS"
for target in $TARGETS; do
  # PREDICTION_FROM: an earlier study's directory whose ranking of the candidates is read back (its
  # <target>/prediction-PREDICTOR/affinity.json, alone: its cells were not run here, so their cost is not counted),
  # so the same partners are verified and the predictor is not run again
  kept="${PREDICTION_FROM:-}/$target/prediction-$PREDICTOR/affinity.json"
  if [ -n "${PREDICTION_FROM:-}" ] && [ ! -e "$OUT/$target/prediction-$PREDICTOR" ]; then
    [ -f "$kept" ] || { echo "PREDICTION_FROM: no $kept" >&2; exit 2; }
    mkdir -p "$OUT/$target/prediction-$PREDICTOR" && cp "$kept" "$OUT/$target/prediction-$PREDICTOR/"
  fi
  "$MTBIO" select --target "$target" --candidates "$CANDIDATES" --top "$TOP" --predictor "$PREDICTOR" \
      --task-examples "$target=$TARGET_EXAMPLES" --encoder "$ENCODER" --data-dir "$DATA_DIR" --recipe "$RECIPE" \
      "${train_args[@]}" "${predictor_args[@]}" --seed 42 --seeds "$SEEDS" --parallel "$PARALLEL" \
      --group-training "$GROUP_TRAINING" --output "$OUT/$target"
done
