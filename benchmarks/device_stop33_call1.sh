#!/usr/bin/env bash
# Stop 33, H200 call 1: v11's decode path where stop 32 left it furthest below the vendor: the tail wave at
# N = 10240 (160 tiles of 64 rows on 132 SMs) and M = 96 (measured at 608640e, before the final decode table).
# Sweeps split S and tile width per shape (benchmarks/v11_decode_sweep.py: checked, then graph-timed against the
# vendor through evaluator.runtime.timing); the table's choice is one row of each shape.
# Usage (device tool, carrying .whl with GitPython/gitdb/smmap): bash benchmarks/device_stop33_call1.sh
set -o pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site:$PWD || exit 1
export PYTHONUNBUFFERED=1
exec > >(tee $OUT/call1.log) 2>&1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv
date -u
mkdir -p /tmp/s
timeout 500 python3 benchmarks/v11_decode_sweep.py --shapes 96x10240x8192,128x10240x8192,96x8192x8192,128x4096x4096 \
    --splits 1,2,3,4,6 --no-chunk8 --name v11_tail_sweep --deadline-s 440 --out /tmp/s | tail -60
cp /tmp/s/v11_tail_sweep.* $OUT/ 2>/dev/null
date -u
