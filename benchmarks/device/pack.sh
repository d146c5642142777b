#!/bin/bash
# Build .devrun/ (git-ignored): what benchmarks/device/cpu_set.sh and gpu_set.sh need on a machine that has Python,
# torch, transformers, accelerate, pyarrow and pandas but not mtbio's other dependencies, nor the data (a lent GPU
# host, whose CPU may have AMX). About 50 MB: the encoder in float16 (xz), BC5CDR-chem (train, dev, the head of
# test), DDI and ChemProt the same way in gpu-data.tar.xz (for gpu_set.sh), and wheels of the packages such an
# image lacks, for Python 3.12 on x86-64.
set -euo pipefail
cd "$(dirname "$0")/../.."
D=.devrun
pins() { python -c 'import sys; from importlib.metadata import version; print(*(f"{n}=={version(n)}" for n in sys.argv[1:]))' "$@"; }
rm -rf $D && mkdir -p $D/enc $D/data/BC5CDR-chem $D/whl
python benchmarks/device/encoder.py pack $D/enc
SRC=${MTBIO_DATA_DIR:-../shared/data}/BC5CDR-chem
cp $SRC/train.tsv $SRC/devel.tsv $D/data/BC5CDR-chem/
awk 'NF == 0 {n++} {print} n >= 20 {exit}' $SRC/test.tsv > $D/data/BC5CDR-chem/test.tsv  # read, never scored
G=$(mktemp -d)
for pair in DDI:tsv ChemProt:txt; do
  name=${pair%:*} ext=${pair#*:}; mkdir -p $G/$name
  cp ${MTBIO_DATA_DIR:-../shared/data}/$name/train.$ext ${MTBIO_DATA_DIR:-../shared/data}/$name/dev.$ext $G/$name/
  head -n 20 ${MTBIO_DATA_DIR:-../shared/data}/$name/test.$ext > $G/$name/test.$ext
done
tar cJf $D/gpu-data.tar.xz -C $G DDI ChemProt && rm -rf $G
python -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    --platform any -d $D/whl $(pins datasets dill multiprocess pydantic pydantic-core annotated-types typing-inspection)
python -m pip wheel -q --no-deps $(pins seqeval) -w $D/whl  # an sdist on PyPI
du -sh $D
