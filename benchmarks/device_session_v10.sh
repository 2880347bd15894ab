# Issue 19 final H200 session (run from a staged copy of the commit given as $1): host launch cost, the v10
# measurement through the evaluator, the ladder run from v09, and the GPU tests of tests/test_sm90_v10.py.
set -o pipefail
export NEARPEAK_COMMIT=$1
exec > >(tee $OUT/dev.log) 2>&1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv
date -u
timeout 45 python3 benchmarks/host_launch.py --rounds 5 --calls 200 --out $OUT
date -u
timeout 200 python3 benchmarks/sm90_v10.py --rounds 3 --profile --compare --out $OUT
date -u
RUNS=/tmp/runs
timeout 120 python3 -m agent.cli run --target sm90 --from kernels/sm90/bf16/v09_tuned.py --proposer ladder --steps 1 --runs-dir $RUNS --run-id h200-v10
python3 -m agent.cli history $RUNS/h200-v10 > $OUT/ladder_history.txt 2>&1
python3 -m agent.cli history $RUNS/h200-v10 --json >> $OUT/ladder_history.txt 2>&1
timeout 30 python3 -m agent.cli replay $RUNS/h200-v10 --plot $OUT/climb.png
tar czf $OUT/sm90_v10_ladder_run.tgz -C $RUNS h200-v10
date -u
timeout 60 python3 -m pytest -q -p no:cacheprovider tests/test_sm90_v10.py -m gpu 2>&1 | tail -15
date -u
