#!/usr/bin/env bash
# One encoder, many tasks (issue 32): Table 3's four biomedical tasks in six rows, at the Table 3 study's scale
# and recipe (the packaged MiniLM-L6, mtbio/training/recipes/minilm.yml, 2,000 training examples per task,
# dev scored once at the end, test scored once with the weights dev chose), every row in fp32 so that any CPU
# can train any cell (Table 3's committed cells are bf16, which a CPU without AVX512-BF16 or AMX cannot run):
#
#   single-task, MT-Refinement, MT-Fine-Tune   examples/mtbert_biomedical.sh's cells, trained by it into
#                                              RESULTS/table3 with this script's TRAIN_ARGS (TABLE3 elsewhere:
#                                              those cells instead, e.g. the committed bf16 ones)
#   single-task LoRA                           the encoder frozen, one LoRA + head per task
#   refined + LoRA                             the refined encoder frozen, one LoRA + head per task
#   merged                                     the four single-task encoders merged into one (mtbio merge)
#
# Chosen on dev, never on test: the LoRA learning rate (LORA_LRS, seed 42's mean dev over the four tasks) and
# the merge method (MERGE_METHODS, mean dev over seeds and tasks). The tables test each row against
# single-task per task (paired over seeds, Holm over the table's tests).
#
#   bash examples/adapters.sh       # resumes: finished cells are skipped
#
# ROWS trains some rows only (no tables; nor with TABLES=0), so that copies with different SEEDS share a machine, e.g.
#   ROWS=single-task-lora SEEDS="43 44" bash examples/adapters.sh & ROWS=merged SEEDS="42 43" bash examples/adapters.sh
# (table3 is trained by whichever copy has it in ROWS; refined-lora and merged reuse its weights from OUT).
# LR_SEED (the first seed by default) is the seed whose dev scores choose the LoRA rate.
#
# Weights go to OUT (not committed); the small files of every finished cell to RESULTS (committed; folded into
# RESULTS/cells.jsonl and RESULTS/table3/cells.jsonl by `mtbio sweep pack DIR --remove`: a cell kept there is done).
# tests/test_examples.py runs this script in a tiny mode.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
TASKS=${TASKS:-chemprot,ddi,bc5cdr-disease,bc5cdr-chem}
SEEDS=${SEEDS:-42 43 44}
DATA_DIR=${DATA_DIR:-../shared/data}
ENCODER=${ENCODER:-minilm}
RECIPE=${RECIPE:-minilm}
TRAIN_ARGS=${TRAIN_ARGS:---max-train-examples 2000 --mixed-precision no --eval-every 1000000}
LORA_LRS=${LORA_LRS:-2e-4 1e-3}
MERGE_METHODS=${MERGE_METHODS:-ties average}
SPLITS=${SPLITS:-dev test}                          # tables to write; test is scored only if listed
OUT=${OUT:-runs/adapters-biomedical}
RESULTS=${RESULTS:-$HERE/adapters_biomedical}
TABLE3=${TABLE3:-$RESULTS/table3}                   # single-task, refine and mt-fine-tune cells
MTBIO=${MTBIO:-mtbio}
ALL_ROWS="table3 single-task-lora refined-lora merged"
ROWS=${ROWS:-$ALL_ROWS}

read -r -a train_args <<< "$TRAIN_ARGS"
read -r -a seeds <<< "$SEEDS"
LR_SEED=${LR_SEED:-${seeds[0]}}
row() { [[ " $ROWS " == *" $1 "* ]]; }
common=(--data-dir "$DATA_DIR" --recipe "$RECIPE" "${train_args[@]}" --resume)
scores=()
for split in $SPLITS; do scores+=(--score "$split"); done
[[ " $SPLITS " == *" test "* ]] && common+=(--eval-test)
tasks=${TASKS//,/ }

done_cell() {  # CELL: kept in RESULTS, as its folder or as its line of RESULTS/cells.jsonl (`mtbio sweep pack`)
  [ -f "$RESULTS/$1/results.json" ] || grep -qF "{\"cell\": \"$1\"," "$RESULTS/cells.jsonl" 2>/dev/null
}
keep() {  # a finished cell's small files, from OUT to RESULTS
  mkdir -p "$RESULTS/$1/tasks"
  cp "$OUT/$1/results.json" "$OUT/$1/config.yaml" "$RESULTS/$1/" 2>/dev/null || cp "$OUT/$1/results.json" "$RESULTS/$1/"
  cp "$OUT/$1/tasks/"*.yml "$RESULTS/$1/tasks/"
}
best_on_dev() {  # best_on_dev TEMPLATE CHOICE...: prints "CHOICE SCORE" for the choice whose runs under
  python - "$@" <<'EOF'   # TEMPLATE ({} = the choice) have the best mean primary dev score over tasks and seeds
import json, sys, pathlib, yaml
def kept(folder):  # (results, {task: its saved definition}) of each cell below folder: its own folder, or its
    folder = pathlib.Path(folder)  # line of a cells.jsonl above (`mtbio sweep pack`), its folder gone
    for results in sorted(folder.rglob("results.json")):
        yield json.loads(results.read_text()), {p.stem: p.read_text() for p in (results.parent / "tasks").glob("*.yml")}
    for study in [folder, *folder.parents][:7]:
        lines = (study / "cells.jsonl").read_text().splitlines() if (study / "cells.jsonl").is_file() else []
        for cell in map(json.loads, lines):
            if (study / cell["cell"]).is_relative_to(folder) and not (study / cell["cell"]).exists():
                yield cell["results"], {pathlib.Path(n).stem: t for n, t in cell["files"].items() if n.startswith("tasks/")}
def mean_dev(folder):
    scores = []
    for results, tasks in kept(folder):
        for task, values in results.get("dev", {}).items():
            scores.append(values[yaml.safe_load(tasks[task])["metric"]])
    return sum(scores) / len(scores)
template, choices = sys.argv[1], sys.argv[2:]
best = max(choices, key=lambda choice: mean_dev(template.replace("{}", choice)))
print(best, round(mean_dev(template.replace("{}", best)), 6))
EOF
}
lora_cell() {  # lora_cell CELL SEED LR [START]: one task per call, TASK from the cell's name; START a refine run
  local cell=$1 seed=$2 lr=$3 start=(--encoder "$ENCODER") lock
  [ -n "${4:-}" ] && start=(--from "$4")
  done_cell "$cell" && return 0
  mkdir -p "$OUT/$(dirname "$cell")"
  exec {lock}>"$OUT/$cell.lock"  # copies sharing OUT (LR_SEED's cells) take turns: a cell is trained once
  flock "$lock"
  if ! done_cell "$cell"; then
    "$MTBIO" finetune --task "$(basename "$cell")" "${start[@]}" --seed "$seed" "${common[@]}" --adapter lora \
        --lr "$lr" --output "$OUT/$(dirname "$cell")"
    keep "$cell"
  fi
  exec {lock}>&-
}

# 1. the LoRA learning rate, on LR_SEED's dev
if row single-task-lora || row refined-lora; then
  for lr in $LORA_LRS; do
    for task in $tasks; do lora_cell "single-task-lora/lr-$lr/seed-$LR_SEED/$task" "$LR_SEED" "$lr"; done
  done
  read -r best_lr best <<< "$(best_on_dev "$RESULTS/single-task-lora/lr-{}/seed-$LR_SEED" $LORA_LRS)"
  echo "LoRA learning rate chosen on dev (seed $LR_SEED, mean over tasks): $best_lr ($best)"
fi

for seed in "${seeds[@]}"; do
  # 2. Table 3's rows, unless TABLE3 holds cells trained elsewhere
  if row table3 && [ "$TABLE3" = "$RESULTS/table3" ]; then
    SEEDS=$seed TASKS=$TASKS DATA_DIR=$DATA_DIR ENCODER=$ENCODER RECIPE=$RECIPE TRAIN_ARGS=$TRAIN_ARGS SPLITS=$SPLITS \
        OUT=$OUT RESULTS=$TABLE3 MTBIO=$MTBIO TABLES=0 bash "$HERE/mtbert_biomedical.sh"
  fi
  # single-task LoRA at the chosen rate
  if row single-task-lora; then
    for task in $tasks; do lora_cell "single-task-lora/lr-$best_lr/seed-$seed/$task" "$seed" "$best_lr"; done
  fi
  # refined + LoRA: Table 3's refine run, retrained if its weights are gone
  refined=$OUT/refine/seed-$seed
  need=0
  for task in $tasks; do done_cell "refined-lora/seed-$seed/$task" || need=1; done
  if row refined-lora && [ $need = 1 ]; then
    [ -f "$refined/results.json" ] || "$MTBIO" refine --tasks "$TASKS" --encoder "$ENCODER" --seed "$seed" \
        "${common[@]}" --output "$refined"
    for task in $tasks; do lora_cell "refined-lora/seed-$seed/$task" "$seed" "$best_lr" "$refined"; done
  fi
  # merged single-task encoders: Table 3's single-task runs, retrained if their weights are gone
  need=0
  for method in $MERGE_METHODS; do done_cell "merged/$method/seed-$seed" || need=1; done
  if row merged && [ $need = 1 ]; then
    runs=()
    for task in $tasks; do
      [ -f "$OUT/single-task/seed-$seed/$task/results.json" ] || "$MTBIO" finetune --task "$task" \
          --encoder "$ENCODER" --seed "$seed" "${common[@]}" --output "$OUT/single-task/seed-$seed"
      runs+=("$OUT/single-task/seed-$seed/$task")
    done
    for method in $MERGE_METHODS; do
      done_cell "merged/$method/seed-$seed" && continue
      rm -rf "$OUT/merged/$method/seed-$seed"
      "$MTBIO" merge "${runs[@]}" --method "$method" "${scores[@]}" --data-dir "$DATA_DIR" \
          --output "$OUT/merged/$method/seed-$seed"
      keep "merged/$method/seed-$seed"
    done
  fi
done

# 3. the merge method, on dev over every seed; then the tables
[ "$ROWS" = "$ALL_ROWS" ] && [ "${TABLES:-1}" = 1 ] || exit 0   # TABLES=0: cells only
read -r best_method best <<< "$(best_on_dev "$RESULTS/merged/{}" $MERGE_METHODS)"
echo "merge method chosen on dev (mean over seeds and tasks): $best_method ($best)"
for split in $SPLITS; do
  "$MTBIO" report "$TABLE3/single-task" "$RESULTS/single-task-lora/lr-$best_lr" "$TABLE3/refine" \
      "$TABLE3/mt-fine-tune" "$RESULTS/refined-lora" "$RESULTS/merged/$best_method" \
      --label single-task --label single-task-lora --label mt-refinement --label mt-fine-tune \
      --label refined-lora --label "merged-$best_method" --split "$split" --trivial --data-dir "$DATA_DIR" \
      --compare-to single-task --compare-each --output "$RESULTS/table-$split.md"
done
