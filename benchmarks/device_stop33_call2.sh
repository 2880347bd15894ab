#!/usr/bin/env bash
# Stop 33, H200 call 2: call 1 found 128-row W tiles far ahead of the table's 64 at N = 10240 and M = 96 and behind
# at 128 x 4096 x 4096, so: the table's choice against both tile widths (table split) at every LLM layer (N, K) of
# benchmarks/llm_shapes.py with M = 96 and 128 (A's box is 128 rows for M in 65..128), plus M = 72 and 112.
# Usage (device tool, carrying .whl with GitPython/gitdb/smmap): bash benchmarks/device_stop33_call2.sh
set -o pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site:$PWD || exit 1
export PYTHONUNBUFFERED=1
exec > >(tee $OUT/call2.log) 2>&1
date -u
mkdir -p /tmp/s
timeout 500 python3 benchmarks/v11_decode_sweep.py --shapes 96x4096x4096,96x6144x4096,96x8192x8192,96x8192x28672,96x10240x8192,96x28672x4096,96x3584x18944,96x4096x14336,96x14336x4096,128x4096x4096,128x6144x4096,128x8192x8192,128x8192x28672,128x10240x8192,128x28672x4096,128x3584x18944,128x4096x14336,128x14336x4096,72x10240x8192,72x8192x8192,112x10240x8192,112x4096x4096 \
    --splits "" --no-chunk8 --name v11_width_sweep --deadline-s 440 --out /tmp/s | tail -90
cp /tmp/s/v11_width_sweep.* $OUT/ 2>/dev/null
date -u
