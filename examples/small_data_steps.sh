#!/usr/bin/env bash
# Issue 88's development check (examples/small_data_steps.md): today's recipe against the candidate step rule on a
# development split of three tasks' training files, 100 examples, three seeds, both arms alternating in one process
# per lane; the cells' phases, costs and development scores go to benchmarks/results/bench_cell-100*.json.
#   bash examples/small_data_steps.sh        # resumes: cells already in the result files are kept
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
cd "$HERE/.."
DATA_DIR=${DATA_DIR:-../shared/data}
PYTHON=${PYTHON:-python}
lane() {  # $1: comma-separated tasks, $2: result name
  OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 "$PYTHON" benchmarks/bench_cell.py --tasks "$1" --size 100 --seeds 42,43,44 \
      --data-dir "$DATA_DIR" --common "--task-defs examples/small_data_steps/devsplit --max-eval-examples 500" \
      --arm recipe="--recipe minilm" --arm candidate="--recipe minilm --max-epochs 20 --evaluations 5" \
      --output "$2" --resume
}
lane chemprot-devsplit bench_cell-100-lane1 &
lane bc5cdr-disease-devsplit,mediqa-rqe-devsplit bench_cell-100-lane2 &
wait
