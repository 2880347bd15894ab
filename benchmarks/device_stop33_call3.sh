#!/usr/bin/env bash
# Stop 33, H200 call 3: v11 with the tail-aware tile width (128-row W tiles when 64-row ones would outnumber the
# SMs; calls 1 and 2) through the scored path, `evaluator.api.evaluate(run=True)` (benchmarks/llm_shapes.py), at
# the Llama-3-8B and -70B layers with M = 96 and 128 (the 70B qkv_proj is Qwen2.5-72B's too).
# Usage (device tool, carrying .whl with GitPython/gitdb/smmap): bash benchmarks/device_stop33_call3.sh
set -o pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site:$PWD || exit 1
export PYTHONUNBUFFERED=1
exec > >(tee $OUT/call3.log) 2>&1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv
date -u
mkdir -p /tmp/l
timeout 500 python3 benchmarks/llm_shapes.py --models llama-3-8b,llama-3-70b --m 96,128 --stages v11,v11-fp8 \
    --deadline-s 430 --out /tmp/l | tail -40
cp /tmp/l/llm_shapes.json $OUT/llm_shapes_m96_m128.json; cp /tmp/l/llm_shapes.md $OUT/llm_shapes_m96_m128.md
date -u
