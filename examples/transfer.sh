#!/usr/bin/env bash
# Does the refined encoder help tasks it never saw? (issue 36; MT-DNN's domain-adaptation experiment.)
# The four biomedical extraction tasks of Table 3 are refined together at the study's scale (the packaged
# MiniLM-L6, recipe mtbio/training/recipes/minilm.yml, 2,000 examples per task, bf16), once plainly and
# once with L2-SP toward the pretrained weights (--l2sp, a variant meant not to forget). Each held-out
# target (NCBI-disease tagging, HoC multi-label, MQP and MEDIQA-RQE pairs) is then fine-tuned at 100, 300
# and 1,000 training examples from the plain encoder and from each refined one, three seeds, dev scored
# once at the end of each cell (nothing is selected on dev, so dev is a held-out score; test is not touched).
# Beside them: the trivial score and the no-training baselines of each encoder (embedding cosine for pairs,
# a linear probe otherwise).
#
#   bash examples/transfer.sh        # resumes: finished cells and a finished variant are skipped
#
# The sweep directory is examples/transfer_biomedical/: cells' small files are committed, weights are
# ignored by git (examples/.gitignore). tests/test_examples.py runs this script in a tiny mode.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
REFINE_ON=${REFINE_ON:-chemprot,ddi,bc5cdr-chem,bc5cdr-disease}
TARGETS=${TARGETS:-ncbi-disease,hoc,mqp,mediqa-rqe}
SIZES=${SIZES:-100,300,1000}
SEEDS=${SEEDS:-42 43 44}
L2SP=${L2SP-100}                                    # the L2-SP variant's alpha; empty: no variant
DATA_DIR=${DATA_DIR:-../shared/data}
ENCODER=${ENCODER:-minilm}
RECIPE=${RECIPE:-minilm}
TRAIN_ARGS=${TRAIN_ARGS:---max-train-examples 2000 --mixed-precision bf16 --eval-every 1000000}
OUT=${OUT:-$HERE/transfer_biomedical}
PARALLEL=${PARALLEL:-1}
MTBIO=${MTBIO:-mtbio}

read -r -a train_args <<< "$TRAIN_ARGS"
read -r -a seeds <<< "$SEEDS"
common=(--encoder "$ENCODER" --data-dir "$DATA_DIR" --recipe "$RECIPE" "${train_args[@]}" --seed "${seeds[0]}")
variants=()
if [ -n "$L2SP" ]; then
    variant=$OUT/variants/l2sp-$L2SP
    if [ ! -f "$variant/results.json" ]; then
        "$MTBIO" refine --tasks "$REFINE_ON" "${common[@]}" --l2sp "$L2SP" --output "$variant" --resume
    fi
    variants=(--refine-on "$variant")
fi
"$MTBIO" transfer --refine-on "$REFINE_ON" "${variants[@]}" --targets "$TARGETS" --sizes "$SIZES" "${common[@]}" \
    --seeds "${#seeds[@]}" --output "$OUT" --parallel "$PARALLEL"
