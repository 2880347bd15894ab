#!/usr/bin/env bash
# Stop 33, H200 call 4: v11 with A's rows in 16-row TMA boxes that stop at M (call 2's sweep: with 64-row W tiles
# the time grew as M fell below its 128-row slot, 72 x 8192 x 8192 1.6x slower than 128 x 8192 x 8192, the box's
# zero-filled overhang being the difference). 1) v11's GPU tests (correctness, bitwise reproducibility, fresh
# tensors on a cached plan; new cases with M short of its slot); 2) the table's choice and both tile widths at
# M = 72, 96, 112, 128; 3) the scored path (benchmarks/llm_shapes.py) at M = 96 and 72 on Llama-3-8B and -70B.
# Usage (device tool, carrying .whl with GitPython/gitdb/smmap): bash benchmarks/device_stop33_call4.sh
set -o pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site:$PWD || exit 1
export PYTHONUNBUFFERED=1
exec > >(tee $OUT/call4.log) 2>&1
date -u
timeout 200 python3 -m pytest -q -n 0 -m gpu tests/test_sm90_v11.py 2>&1 | tail -8
date -u
mkdir -p /tmp/s /tmp/l
timeout 120 python3 benchmarks/v11_decode_sweep.py --shapes 72x8192x8192,72x10240x8192,72x4096x4096,72x6144x4096,72x3584x18944,96x8192x8192,96x10240x8192,96x4096x4096,96x6144x4096,96x3584x18944,112x8192x8192,112x10240x8192,112x4096x4096,112x6144x4096,112x3584x18944,128x8192x8192,128x10240x8192,128x4096x4096,128x6144x4096,128x3584x18944 --splits "" --no-chunk8 --name v11_abox_sweep \
    --deadline-s 100 --out /tmp/s | tail -82
cp /tmp/s/v11_abox_sweep.* $OUT/ 2>/dev/null
date -u
timeout 300 python3 benchmarks/llm_shapes.py --models llama-3-8b,llama-3-70b --m 96,72 --stages v11,v11-fp8 \
    --deadline-s 260 --out /tmp/l | tail -40
cp /tmp/l/llm_shapes.json $OUT/llm_shapes_m96_m72.json; cp /tmp/l/llm_shapes.md $OUT/llm_shapes_m96_m72.md
date -u
