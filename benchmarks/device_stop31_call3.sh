#!/usr/bin/env bash
# Stop 31, H200 call 3 (issues 24, 23, 29, 25): the real-model sm90 run's step (4 replies written from its prompt
# files, resumed here and measured), the sm90 occupancy validation set through eval --run, the adversarial suite,
# v10 vs v11 at LLM shapes (llm_shapes --quick under a deadline), and the loop from v10 at a decode shape under
# graph timing with the ladder proposer. Each part's results are copied into $OUT as soon as it ends.
# Usage (device tool, carrying .whl with GitPython/gitdb/smmap and runs/real_sm90_v05): bash benchmarks/device_stop31_call3.sh
set -o pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site:$PWD || exit 1
export PYTHONUNBUFFERED=1
exec > >(tee $OUT/call3.log) 2>&1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv
date -u
timeout 120 python3 -m agent.cli run --resume runs/real_sm90_v05 --reply-wait 0 | tail -30
python3 -m agent.cli history runs/real_sm90_v05 > runs/real_sm90_v05.history.txt 2>&1
tar czf $OUT/real_sm90_v05.tgz runs/real_sm90_v05 runs/real_sm90_v05.history.txt
date -u
mkdir -p /tmp/v
timeout 170 python3 benchmarks/knob_variants_gpu.py --out-dir /tmp/v --set benchmarks/sm90_occupancy_variants.json \
    --commit "$NEARPEAK_GIT_COMMIT" | tail -4
cp /tmp/v/*.jsonl $OUT/
date -u
mkdir -p /tmp/a
timeout 140 python3 benchmarks/adversarial_gpu.py --out /tmp/a | tail -3
tar czf $OUT/adversarial.tgz -C /tmp a
date -u
mkdir -p /tmp/l
timeout 110 python3 benchmarks/llm_shapes.py --quick --deadline-s 95 --out /tmp/l | tail -20
tar czf $OUT/llm_shapes.tgz -C /tmp l
date -u
timeout 90 python3 -m agent.cli run --target sm90 --from kernels/sm90/bf16/v10_split_k.py --proposer ladder --steps 1 \
    --shape 16,4096,14336 --timing graph --runs-dir runs --run-id v10_decode_graph | tail -12
python3 -m agent.cli history runs/v10_decode_graph > runs/v10_decode_graph.history.txt 2>&1
python3 -m agent.cli report runs/v10_decode_graph -o runs/v10_decode_graph.report.html 2>&1 | tail -1
tar czf $OUT/v10_decode_graph.tgz runs/v10_decode_graph runs/v10_decode_graph.history.txt runs/v10_decode_graph.report.html
date -u
