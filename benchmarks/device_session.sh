#!/usr/bin/env bash
# One batched call on the lent H200: every GPU check the issues ask for, results packed into $OUT.
# Usage (device tool, carrying .whl): bash benchmarks/device_session.sh
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
R=/tmp/results; mkdir -p $R
step() { echo "=== $(date -u +%T) $*"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $R/nvidia_smi.csv
step "runtime evaluation benchmark"
timeout 170 python3 benchmarks/runtime_gpu_check.py kernels/sm90/bf16/v09_tuned.py --out $R 2>&1 | tail -15
step "nearpeak eval --run --profile"
timeout 100 python3 -m agent.cli eval kernels/sm90/bf16/v09_tuned.py --run --profile --json > $R/eval_v09_run.json 2> $R/eval_v09_run.err
python3 -c "import json;r=json.load(open('$R/eval_v09_run.json'));print(r['status'],{k:r.get('runtime',{}).get(k) for k in ('correct','tflops','ratio_vs_vendor','tensor_pipe_pct','timing_method')})"
step "ncu fixture"
timeout 60 ncu --clock-control none -k regex:^gemm_kernel --csv --metrics sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_tensor_op_gmma.sum,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active \
  python3 -m evaluator.profilers.ncu_target kernels/sm90/bf16/v09_tuned.py > $R/ncu_h200.csv 2> $R/ncu_h200.err; tail -3 $R/ncu_h200.csv
step "adversarial suite"
timeout 200 python3 benchmarks/adversarial_gpu.py --out $R --skip gpu_hang_kernel 2>&1 | tail -25
step "agent run on sm90"
timeout 150 python3 -m agent.cli run --target sm90 --from kernels/sm90/bf16/v02_tma.py --proposer ladder --steps 1 \
  --runs-dir /tmp/runs --run-id h200-ladder 2>&1 | tail -15
python3 -m agent.cli history /tmp/runs/h200-ladder > $R/run_history.txt 2>&1; cat $R/run_history.txt
tar czf $R/run_ledger.tgz -C /tmp/runs h200-ladder 2>/dev/null
step "gpu tests"
timeout 120 python3 -m pytest -q -m gpu tests -p no:cacheprovider 2>&1 | tail -15 | tee $R/pytest_gpu.txt
tar czf $OUT/results.tgz -C $R .
step done
