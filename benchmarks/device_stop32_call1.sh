#!/usr/bin/env bash
# Stop 32, H200 call 1 (issue 25): v11's GPU tests after the per-call-argument fix, then v10 vs v11 at the LLM
# shapes of benchmarks/llm_shapes.py --quick (both timings), then the loop from v10 at a decode shape under graph
# timing with the ladder proposer. Each part's results are copied into $OUT as soon as it ends.
# Usage (device tool, carrying .whl with GitPython/gitdb/smmap): bash benchmarks/device_stop32_call1.sh
set -o pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site:$PWD || exit 1
export PYTHONUNBUFFERED=1
exec > >(tee $OUT/call1.log) 2>&1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
date -u
timeout 150 python3 -m pytest -q -n 0 -m gpu tests/test_sm90_v11.py -x 2>&1 | tail -15
date -u
mkdir -p /tmp/l
timeout 330 python3 benchmarks/llm_shapes.py --quick --deadline-s 300 --out /tmp/l | tail -40
tar czf $OUT/llm_shapes.tgz -C /tmp l
date -u
timeout 80 python3 -m agent.cli run --target sm90 --from kernels/sm90/bf16/v10_split_k.py --proposer ladder --steps 1 \
    --shape 16,4096,14336 --timing graph --runs-dir runs --run-id v10_decode_graph | tail -12
python3 -m agent.cli history runs/v10_decode_graph > runs/v10_decode_graph.history.txt 2>&1
tar czf $OUT/v10_decode_graph.tgz runs/v10_decode_graph runs/v10_decode_graph.history.txt
date -u
