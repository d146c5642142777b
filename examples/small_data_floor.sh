#!/usr/bin/env bash
# The small-data floor (issue 63): every public shipped task at 100 and 1,000 training examples (all of a smaller
# set), the packaged MiniLM-L6, three seeds, trained alone under today's defaults and under the small-data recipe,
# each run beside its own no-training baselines (results.json's `baselines`: a probe on frozen features, the
# zero-shot cosine of pairs, computed on the run's own data). Declared in examples/small_data_floor.md before the
# first cell; the table is written by examples/small_data_floor.py from the kept cells.
#
#   bash examples/small_data_floor.sh           # resumes: a cell whose results are in RESULTS is skipped, an
#                                               # interrupted one continues from its newest checkpoint
#   PLAN_ONLY=1 bash examples/small_data_floor.sh   # the size and task of each point, in the order they run
#
# Cells: ARM/TASK/n-SIZE/seed-S. A finished cell's small files (results.json, config.yaml, tasks/) are copied to
# RESULTS, which is committed as one file, RESULTS/cells.jsonl (`mtbio sweep pack RESULTS --remove` folds the cell
# folders into it; a cell kept there is not trained again); weights are not kept. One process per cell (a killed process loses one cell).
# tests/test_examples.py runs this in a tiny mode (tiny encoder, demo data).
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
# EBM-PICO is not among them: ../shared/data/EBM-NLP has no training split (its SOURCE.md)
TASKS=${TASKS:-ncbi-disease hoc mqp mediqa-rqe mqp-bi mediqa-rqe-bi bc5cdr-disease chemprot ddi ade bc5cdr-chem bc2gm jnlpba chia bioasq nli4ct}
SIZES=${SIZES:-100 1000}
# the recipe must not buy small data with large: Table 3's four tasks at 2,000 examples, both arms, after the rest
LARGE_TASKS=${LARGE_TASKS-chemprot ddi bc5cdr-disease bc5cdr-chem}
LARGE_SIZE=${LARGE_SIZE:-2000}
SEEDS=${SEEDS:-42 43 44}
ARMS=${ARMS:-today recipe}
DATA_DIR=${DATA_DIR:-../shared/data}
ENCODER=${ENCODER:-minilm}
OUT=${OUT:-runs/small-data-floor}
RESULTS=${RESULTS:-$HERE/small_data_floor}
TRAIN_ARGS=${TRAIN_ARGS:-}                       # extra options for every cell (the tiny mode's)
MTBIO=${MTBIO:-mtbio}
# today: the defaults before the small-data recipe (no step floor, no LP-FT start, each task's own pooling);
# recipe: the packaged encoder's recipe before issue 88 (no cap on the epochs the step floor adds, 10 evaluations);
# recipe-88: the recipe as shipped now (issue 88: the floor stops at 20 epochs, 5 evaluations)
TODAY_ARGS=${TODAY_ARGS:---recipe minilm --min-steps 1 --no-lp-ft --thresholds fixed --pair-form task --pooling task}
RECIPE_ARGS=${RECIPE_ARGS:---recipe minilm --max-epochs 1000 --evaluations 10}
RECIPE88_ARGS=${RECIPE88_ARGS:---recipe minilm}

read -r -a extra <<< "$TRAIN_ARGS"

# START_CHECK=1: for each recipe cell kept before the LP-FT start became a dev-selection candidate (its results.json
# has no start_scores), evaluate that start (the same run stopped after one step: the start is evaluated before it)
# and keep its dev scores as the cell's start.json; examples/small_data_floor.py then keeps the start where it is
# better on dev, as the amended recipe does (the extra evaluation draws no random numbers, so the rest of the run
# is the same).
if [ -n "${START_CHECK:-}" ]; then
  read -r -a options <<< "$RECIPE_ARGS"
  for kept in "$RESULTS"/recipe/*/n-*/seed-*/results.json; do
    cell_dir=$(dirname "$kept")
    cell=${cell_dir#"$RESULTS"/}
    task=$(echo "$cell" | cut -d/ -f2) size=$(echo "$cell" | cut -d/ -f3) seed=${cell##*seed-}
    [ -f "$cell_dir/start.json" ] && continue
    grep -q '"start_scores"' "$kept" && continue
    rm -rf "${OUT:?}/start-check/$cell"
    "$MTBIO" finetune --task "$task" --encoder "$ENCODER" --data-dir "$DATA_DIR" --seed "$seed" \
        --max-train-examples "${size#n-}" "${options[@]}" "${extra[@]}" --max-steps 1 --no-baselines \
        --output "$OUT/start-check/$cell" < /dev/null
    python -c "import json, sys; r = json.load(open(sys.argv[1])); json.dump({'start_scores': r['start_scores'], \
'how': 'the recipe run stopped after one step (examples/small_data_floor.sh START_CHECK)'}, open(sys.argv[2], 'w'), indent=1)" \
        "$OUT/start-check/$cell/$task/results.json" "$cell_dir/start.json"
    rm -rf "${OUT:?}/start-check/$cell"
  done
  exit 0
fi

arm_args() {  # ARM: its options
  case $1 in today) echo "$TODAY_ARGS" ;; recipe) echo "$RECIPE_ARGS" ;; recipe-88) echo "$RECIPE88_ARGS" ;; *) echo "unknown arm $1" >&2; return 2 ;; esac
}

plan() {  # SIZE TASK lines: the small sizes of every task, then the large size of LARGE_TASKS
  local size task
  for size in $SIZES; do for task in $TASKS; do echo "$size $task"; done; done
  for task in $LARGE_TASKS; do echo "$LARGE_SIZE $task"; done
}

if [ -n "${PLAN_ONLY:-}" ]; then plan; exit 0; fi  # the SIZE TASK lines the study runs, in order

# the smaller size first, then task by task, both arms of a seed together: a partial study is a whole part
plan | while read -r size task; do
  {
    for seed in $SEEDS; do
      for arm in $ARMS; do
        cell="$arm/$task/n-$size/seed-$seed"
        [ -f "$RESULTS/$cell/results.json" ] && continue
        grep -qF "{\"cell\": \"$cell\"," "$RESULTS/cells.jsonl" 2>/dev/null && continue  # kept in the study's one file
        read -r -a options <<< "$(arm_args "$arm")"
        resume=()
        [ -f "$OUT/$cell/$task/config.yaml" ] && resume=(--resume)  # an interrupted cell continues from its newest checkpoint
        "$MTBIO" finetune --task "$task" --encoder "$ENCODER" --data-dir "$DATA_DIR" --seed "$seed" \
            --max-train-examples "$size" "${options[@]}" "${extra[@]}" "${resume[@]}" --output "$OUT/$cell"
        mkdir -p "$RESULTS/$cell/tasks"
        cp "$OUT/$cell/$task/results.json" "$OUT/$cell/$task/config.yaml" "$RESULTS/$cell/"
        cp "$OUT/$cell/$task/tasks/"*.yml "$RESULTS/$cell/tasks/"
        rm -rf "${OUT:?}/$cell/$task/encoder" "${OUT:?}/$cell/$task/heads" "${OUT:?}/$cell/$task/checkpoints"
      done
    done
  } < /dev/null  # the runs must not read the plan
done
