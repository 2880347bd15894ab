#!/usr/bin/env bash
# Stop 32, H200 call 4 (issues 25, 29): v11 at Llama-3-70B's M = 128 layers after the dispatch change (a 128-row A
# box goes to v10's path when v10's tiles fill the SMs), then graph-timed A/A of v11 on the final code and ten
# eager A/A repeats of the launch-heavy v09 at the decode shape (benchmarks/aa_check.py).
# Usage (device tool, carrying .whl with GitPython/gitdb/smmap): bash benchmarks/device_stop32_call4.sh
set -o pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site:$PWD || exit 1
export PYTHONUNBUFFERED=1
exec > >(tee $OUT/call4.log) 2>&1
date -u
mkdir -p /tmp/m /tmp/aa
timeout 100 python3 benchmarks/llm_shapes.py --models llama-3-70b --m 128 --stages v11,v11-fp8 --deadline-s 85 \
    --out /tmp/m | tail -16
tar czf $OUT/llm_shapes_m128.tgz -C /tmp m
date -u
timeout 80 python3 benchmarks/aa_check.py --kernel kernels/sm90/bf16/v11_small_m.py --shape 16x4096x14336 \
    --timing graph --repeats 5 --out /tmp/aa --name v11_graph | tail -6
timeout 100 python3 benchmarks/aa_check.py --kernel kernels/sm90/bf16/v09_tuned.py --shape 16x4096x14336 \
    --timing eager --repeats 10 --out /tmp/aa --name v09_eager | tail -6
tar czf $OUT/aa.tgz -C /tmp aa
date -u
