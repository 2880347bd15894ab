#!/usr/bin/env bash
# Second batched H200 call: the GPU-marked tests, the sm90 ladder measured through `nearpeak ladder --run`,
# and last (it may wedge the GPU) the adversarial hung-kernel case.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
R=/tmp/results; mkdir -p $R
step() { echo "=== $(date -u +%T) $*"; }
step "gpu tests"
timeout 300 python3 -m pytest -q -m gpu tests -p no:cacheprovider -rA 2>&1 | tee $R/pytest_gpu_h200.txt | tail -30
step "nearpeak ladder --target sm90 --run"
timeout 220 python3 -m agent.cli ladder --target sm90 --run --json > $R/ladder_sm90_run.json 2> $R/ladder_sm90_run.err
python3 -c "
import json,sys; sys.path.insert(0,'.')
from evaluator.ladder import render
d=json.load(open('$R/ladder_sm90_run.json')); print(render('sm90', d['stages'], None))" | tee $R/ladder_sm90_run.txt
step "adversarial: hung kernel"
timeout 90 python3 benchmarks/adversarial_gpu.py --out $R --name adversarial_h200_hang --only gpu_hang_kernel 2>&1 | tail -5
nvidia-smi --query-gpu=name,utilization.gpu,memory.used --format=csv
tar czf $OUT/results2.tgz -C $R .
step done
