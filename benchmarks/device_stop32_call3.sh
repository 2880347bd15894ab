#!/usr/bin/env bash
# Stop 32, H200 call 3 (issue 25): v10 vs v11 at the LLM shapes of benchmarks/llm_shapes.py --quick with the decode
# table set from call 2's sweep, the loop from v10 at a decode shape under graph timing (ladder proposer), and v11
# at decode shapes the sweep never saw (Qwen2.5-72B layers, M = 8 and 96) under a deadline.
# Usage (device tool, carrying .whl with GitPython/gitdb/smmap): bash benchmarks/device_stop32_call3.sh
set -o pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site:$PWD || exit 1
export PYTHONUNBUFFERED=1
exec > >(tee $OUT/call3.log) 2>&1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv
date -u
mkdir -p /tmp/l /tmp/o
timeout 440 python3 benchmarks/llm_shapes.py --quick --deadline-s 400 --out /tmp/l | tail -24
tar czf $OUT/llm_shapes.tgz -C /tmp l
date -u
timeout 75 python3 -m agent.cli run --target sm90 --from kernels/sm90/bf16/v10_split_k.py --proposer ladder --steps 1 \
    --shape 16,4096,14336 --timing graph --runs-dir runs --run-id v10_decode_graph | tail -6
python3 -m agent.cli history runs/v10_decode_graph > runs/v10_decode_graph.history.txt 2>&1
python3 -m agent.cli report runs/v10_decode_graph 2>&1 | tail -1
tar czf $OUT/v10_decode_graph.tgz runs/v10_decode_graph runs/v10_decode_graph.history.txt
date -u
timeout 60 python3 benchmarks/llm_shapes.py --models qwen2.5-72b --m 96,8 --stages v11,v11-fp8 --deadline-s 45 \
    --out /tmp/o | tail -14
tar czf $OUT/llm_shapes_unseen.tgz -C /tmp o
date -u
