#!/bin/bash
# Issue 37's CPU set on a lent machine's host CPU (AMX on the GPU hosts seen so far), after pack.sh built
# .devrun/ here and the device tool carried it there:  bash benchmarks/device/cpu_set.sh DEADLINE_S
# Jobs run at once, each on 2 threads pinned to 2 cores of their own; at DEADLINE_S the unfinished ones are
# stopped (a bench_train file then holds the sides that finished) and everything goes to $OUT/res.tgz.
# Put the longest jobs (fp32 Trainer sides: 4-5 minutes each on the AMX Xeon) where they can finish.
DEADLINE=${1:-500}
R=/tmp/res; rm -rf $R; mkdir -p $R
T0=$(date +%s)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
    .devrun/whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD MTBIO_DATA_DIR=$PWD/.devrun/data PYTHONUNBUFFERED=1 OMP_NUM_THREADS=2 \
    CUDA_VISIBLE_DEVICES="" TOKENIZERS_PARALLELISM=false
python3 benchmarks/device/encoder.py unpack .devrun/enc /tmp/enc /tmp/site || exit 1
{ date -u; lscpu; free -m; python3 -c "import torch, transformers, datasets; print(torch.__version__,
  transformers.__version__, datasets.__version__, torch.backends.cpu.get_cpu_capability())"; } > $R/machine.txt 2>&1
# two cores per job, one logical CPU per physical core
mapfile -t PAIRS < <(lscpu -p=CPU,CORE,SOCKET | grep -v '^#' | sort -t, -u -k3,3n -k2,2n | cut -d, -f1 | paste -d, - -)
echo "core pairs: ${PAIRS[*]}" >> $R/machine.txt
[ ${#PAIRS[@]} -ge 5 ] || { echo "five jobs need 10 physical cores; this machine has ${#PAIRS[@]} pairs" >&2; exit 1; }
B="python3 benchmarks/bench_train.py --seeds 1 --peak-seconds 2"
job() { local n=$1; shift; mkdir -p $R/$n; "$@" > $R/$n.log 2>&1; echo "$n rc=$? at $(( $(date +%s) - T0 )) s" >> $R/done.txt; }
job bf16 taskset -c ${PAIRS[0]} $B --tasks bc5cdr-chem --precisions bf16 --trainer-precisions bf16 --results-dir $R/bf16 &
job fp32 taskset -c ${PAIRS[1]} $B --tasks bc5cdr-chem --precisions no --trainer-precisions no --results-dir $R/fp32 &
job 512-bf16 taskset -c ${PAIRS[2]} $B --fixed-length 512 --max-train-examples 256 --precisions bf16 \
    --trainer-precisions bf16 --results-dir $R/512-bf16 &
job 512-fp32 taskset -c ${PAIRS[3]} $B --fixed-length 512 --max-train-examples 256 --precisions no \
    --trainer-precisions no --results-dir $R/512-fp32 &
job profile taskset -c ${PAIRS[4]} python3 benchmarks/profile_step.py --tasks bc5cdr-chem --mixed-precision bf16 \
    --warm-steps 10 --steps 10 --verbose-steps 1 --results-dir $R/profile &
while [ $(( $(date +%s) - T0 )) -lt $DEADLINE ] && [ -n "$(jobs -r)" ]; do sleep 5; done
echo "stopped at $(( $(date +%s) - T0 )) s with $(jobs -r | wc -l) jobs running" >> $R/done.txt
pkill -f bench_train.py; pkill -f profile_step.py; sleep 2
cat $R/done.txt; grep -h -E "^(bc5cdr|fixed)" $R/*.log
tar czf ${OUT:-/tmp}/res.tgz -C /tmp res
