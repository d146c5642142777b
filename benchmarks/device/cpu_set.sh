#!/bin/bash
# Issue 37's CPU set on a lent machine's host CPU (AMX on the GPU hosts seen so far), after pack.sh built
# .devrun/ here and the device tool carried it there:  bash benchmarks/device/cpu_set.sh DEADLINE_S
# Each job runs on 2 threads pinned to 2 cores of its own. The sides of a comparison run as separate jobs at the
# same time (benchmarks/device/merge.py joins them), so that the slow Trainer sides fit one call:
#   phase A: mtbio bf16 on BC5CDR-chem with one other job beside it (its share of the bf16 peak is measured on a
#            nearly quiet machine), and the longest job, the fp32 Trainer on BC5CDR-chem;
#   phase B: once mtbio bf16 is done, the other sides (BC5CDR-chem, 512 tokens) and a 512-token bf16 profile.
# At DEADLINE_S the unfinished jobs are stopped; everything goes to $OUT/res.tgz.
# A quick dry run on a small machine with mtbio installed: DRY_RUN=1 EXTRA="--max-train-examples 64"
# L512="--fixed-length 64 --max-train-examples 64" (jobs share cores; no wheels installed).
DEADLINE=${1:-470}
R=/tmp/res; rm -rf $R; mkdir -p $R
T0=$(date +%s)
[ -n "$DRY_RUN" ] || python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
    .devrun/whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD MTBIO_DATA_DIR=$PWD/.devrun/data PYTHONUNBUFFERED=1 OMP_NUM_THREADS=2 \
    CUDA_VISIBLE_DEVICES="" TOKENIZERS_PARALLELISM=false
python3 benchmarks/device/encoder.py unpack .devrun/enc /tmp/enc /tmp/site || exit 1
{ date -u; lscpu; free -m; python3 -c "import torch, transformers, datasets; print(torch.__version__,
  transformers.__version__, datasets.__version__, torch.backends.cpu.get_cpu_capability())"; } > $R/machine.txt 2>&1
# two cores per job, one logical CPU per physical core
mapfile -t PAIRS < <(lscpu -p=CPU,CORE,SOCKET | grep -v '^#' | sort -t, -u -k3,3n -k2,2n | cut -d, -f1 | paste -d, - -)
while [ -n "$DRY_RUN" ] && [ ${#PAIRS[@]} -lt 8 ]; do PAIRS+=("${PAIRS[0]}"); done
echo "core pairs: ${PAIRS[*]}" >> $R/machine.txt
[ ${#PAIRS[@]} -ge 8 ] || { echo "eight jobs need 16 physical cores; this machine has ${#PAIRS[@]} pairs" >&2; exit 1; }
B="python3 benchmarks/bench_train.py --seeds 1 --peak-seconds 2 $EXTRA"
L512=${L512:-"--fixed-length 512 --max-train-examples 256"}
job() { local n=$1 p=$2; shift 2; mkdir -p $R/$n; taskset -c $p "$@" --results-dir $R/$n > $R/$n.log 2>&1
        echo "$n rc=$? at $(( $(date +%s) - T0 )) s" >> $R/done.txt; }
left() { [ $(( $(date +%s) - T0 )) -lt $DEADLINE ]; }
echo "phase A at $(( $(date +%s) - T0 )) s" >> $R/done.txt
job bf16-mtbio ${PAIRS[0]} $B --tasks bc5cdr-chem --precisions bf16 --trainer-precisions none & A=$!
job fp32-trainer ${PAIRS[1]} $B --tasks bc5cdr-chem --precisions none --trainer-precisions no &
while left && kill -0 $A 2>/dev/null; do sleep 2; done
echo "phase B at $(( $(date +%s) - T0 )) s" >> $R/done.txt
job bf16-trainer ${PAIRS[0]} $B --tasks bc5cdr-chem --precisions none --trainer-precisions bf16 &
job fp32-mtbio ${PAIRS[2]} $B --tasks bc5cdr-chem --precisions no --trainer-precisions none &
job 512-bf16-mtbio ${PAIRS[3]} $B $L512 --precisions bf16 --trainer-precisions none &
job 512-bf16-trainer ${PAIRS[4]} $B $L512 --precisions none --trainer-precisions bf16 &
job 512-fp32-mtbio ${PAIRS[5]} $B $L512 --precisions no --trainer-precisions none &
job 512-fp32-trainer ${PAIRS[6]} $B $L512 --precisions none --trainer-precisions no &
job profile-512-bf16 ${PAIRS[7]} python3 benchmarks/profile_step.py --fixed-length 512 --mixed-precision bf16 \
    --warm-steps 2 --steps 2 --verbose-steps 1 &
while left && [ -n "$(jobs -r)" ]; do sleep 5; done
echo "stopped at $(( $(date +%s) - T0 )) s with $(jobs -r | wc -l) jobs running" >> $R/done.txt
pkill -f bench_train.py; pkill -f profile_step.py; sleep 2
for pair in "bc5cdr-chem bf16" "bc5cdr-chem fp32" "fixed-512 512-bf16" "fixed-512 512-fp32"; do
  set -- $pair; M=$(ls $R/$2-mtbio/bench_train-$1*.json 2>/dev/null); T=$(ls $R/$2-trainer/bench_train-$1*.json 2>/dev/null)
  if [ -n "$M" ] && [ -n "$T" ]; then python3 benchmarks/device/merge.py $R/merged-$2.json $M $T >> $R/done.txt 2>&1
  else echo "$2: a side did not finish" >> $R/done.txt; fi
done
cat $R/done.txt; grep -h -E "^(bc5cdr|fixed)" $R/*.log
tar czf ${OUT:-/tmp}/res.tgz -C /tmp res
