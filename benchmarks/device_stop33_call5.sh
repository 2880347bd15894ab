#!/usr/bin/env bash
# Stop 33, H200 call 5: benchmarks/llm_shapes.py --quick (v10 and v11, bf16 and fp8, twelve shapes) on the final
# v11 of this stop (tail-aware tile width, A boxes that stop at M), the regression check of calls 3 and 4.
# Usage (device tool, carrying .whl with GitPython/gitdb/smmap): bash benchmarks/device_stop33_call5.sh
set -o pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site:$PWD || exit 1
export PYTHONUNBUFFERED=1
exec > >(tee $OUT/call5.log) 2>&1
date -u
mkdir -p /tmp/l
timeout 450 python3 benchmarks/llm_shapes.py --quick --deadline-s 390 --out /tmp/l | tail -40
cp /tmp/l/llm_shapes.json $OUT/llm_shapes_quick_stop33.json; cp /tmp/l/llm_shapes.md $OUT/llm_shapes_quick_stop33.md
date -u
