#!/usr/bin/env bash
# Stop 31, H200 call 2 (issues 29, 23, 24): the A/A with the widened interval at three shapes (eager, the accept
# rule's default timing), the A/A of the launch-heavy v09 at a decode shape on this tree and on the tree before
# the symmetric A/B (.old, main a447747), the sm90 occupancy and knob variant sets through eval --run, and the
# creation of the real-model sm90 run (manual proposer, K = 4: it writes its planning prompt and stops, exit 6).
# Usage (device tool, carrying .whl with GitPython/gitdb/smmap, and .old): bash benchmarks/device_stop31_call2.sh
set -o pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site:$PWD || exit 1
export PYTHONUNBUFFERED=1
R=/tmp/r; mkdir -p $R  # tarred into $OUT at the end (only 8 files come back)
exec > >(tee $R/call2.log) 2>&1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv
date -u
timeout 190 python3 benchmarks/aa_check.py --timing eager --repeats 10 --out $R --name aa_check_eager | tail -12
date -u
timeout 45 python3 benchmarks/aa_check.py --kernel kernels/sm90/bf16/v09_tuned.py --shape 16x4096x14336 \
    --timing eager --repeats 5 --out $R --name aa_check_v09 | tail -6
(cd .old && NEARPEAK_GIT_COMMIT=a447747 NEARPEAK_GIT_DIRTY=0 PYTHONPATH=/tmp/site:$PWD timeout 45 python3 \
    benchmarks/aa_check.py --kernel kernels/sm90/bf16/v09_tuned.py --shape 16x4096x14336 --timing eager --repeats 5 \
    --out $R --name aa_check_v09_before | tail -6)
date -u
timeout 250 python3 benchmarks/knob_variants_gpu.py --out-dir $R --commit "$NEARPEAK_GIT_COMMIT" | tail -8
date -u
timeout 90 python3 -m agent.cli run --target sm90 --from kernels/sm90/bf16/v05_two_warpgroups.py --proposer manual \
    --candidates 4 --steps 1 --model "frontier-class model (answers written by hand from the prompt files)" \
    --runs-dir runs --run-id real_sm90_v05 --reply-wait 0
echo "run exit: $?"
tar czf $R/real_sm90_v05.tgz runs/real_sm90_v05
date -u
tar czf $OUT/call2.tgz -C /tmp r; cp $R/call2.log $OUT/
