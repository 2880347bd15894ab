#!/usr/bin/env bash
# Stop 32, H200 call 2 (issues 25, 23): v11's GPU tests after the any-S split-K change (counter reset by the
# reducer), the sm90 occupancy set 2 (issue 23, committed in 90607a0 before any estimate) through eval --run, and
# the v11 decode-path knob sweep (bf16) that the decision table is then set from.
# Usage (device tool, carrying .whl with GitPython/gitdb/smmap): bash benchmarks/device_stop32_call2.sh
set -o pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site:$PWD || exit 1
export PYTHONUNBUFFERED=1
exec > >(tee $OUT/call2.log) 2>&1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv
date -u
timeout 100 python3 -m pytest -q -n 0 -m gpu tests/test_sm90_v11.py 2>&1 | tail -6
date -u
timeout 230 python3 benchmarks/knob_variants_gpu.py --set benchmarks/sm90_occupancy_variants_2.json --out-dir "$OUT" \
    --commit "$NEARPEAK_GIT_COMMIT" --timeout 120 | tail -6
date -u
mkdir -p /tmp/s
timeout 190 python3 benchmarks/v11_decode_sweep.py --dtype bf16 --deadline-s 170 --out /tmp/s | tail -90
cp /tmp/s/* $OUT/
date -u
