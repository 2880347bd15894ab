#!/usr/bin/env bash
# Triton 3.9 beside the H200 image's torch 2.11 + Triton 3.6, carried in pieces: the wheel (273 MiB) is over the
# 64 MiB a device call carries, and the device reaches no package index.
#
#   here:    bash benchmarks/triton39_on_h200.sh split      # .whl/triton39.partNN (55 MiB each) + .whl/triton39.sha256
#   device:  one call per part, back to back (a warm machine keeps what earlier calls carried; it goes back 30 s after
#            a call), each carrying its own part: carry [".whl/triton39.part00"], command `ls -l .whl`; and so on;
#            then, carrying [".whl/triton39.sha256"]:  bash benchmarks/triton39_on_h200.sh measure
#
# `measure` joins the parts, checks the wheel's sha256, installs it with --no-deps into a venv that sees the
# image's torch (torch 2.11 pins triton 3.6.0; nearpeak uses only torch's tensors and events, not its compiler),
# then runs the sm90 v10 stages through `nearpeak eval --run` (correctness and timing against the vendor library,
# measured on the H200) and the compile-only ladder, all into $OUT.
set -euo pipefail
cd "$(dirname "$0")/.."
WHEEL=triton-3.9.0-cp311-cp311-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl

case "${1:-}" in
split)
    mkdir -p .whl
    [ -f ".whl/$WHEEL" ] || pip download -q --no-deps -d .whl triton==3.9.0
    (cd .whl && sha256sum "$WHEEL" > triton39.sha256 && split -b 55M -d "$WHEEL" triton39.part)
    ls -l .whl
    ;;
measure)
    : "${OUT:?set OUT to the folder that comes back}"
    exec > >(tee "$OUT/triton39_h200.log") 2>&1
    python3 -c 'import sys; assert sys.version_info[:2] == (3, 11), f"the wheel is for CPython 3.11, not {sys.version}"'
    cat .whl/triton39.part* > ".whl/$WHEEL"
    (cd .whl && sha256sum -c triton39.sha256)
    python3 -m venv --system-site-packages /tmp/t39
    /tmp/t39/bin/pip install -q --no-deps --no-index ".whl/$WHEEL"
    /tmp/t39/bin/python -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)'
    nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv
    export PYTHONPATH=$PWD
    for kernel in kernels/sm90/bf16/v10_split_k.py kernels/sm90/fp8/v10_fp8_split_k.py; do
        for shape in 8192,8192,8192 4096,4096,4096; do
            name=$(basename "$kernel" .py)_${shape//,/x}
            timeout 240 /tmp/t39/bin/python -m agent.cli eval "$kernel" --shape "$shape" --run --json \
                > "$OUT/$name.json" || echo "$name: exit $?"
        done
    done
    timeout 240 /tmp/t39/bin/python -m agent.cli ladder --target sm90 --json > "$OUT/sm90_ladder_triton39.json" \
        || echo "ladder: exit $?"
    ;;
*)
    echo "usage: $0 split|measure" >&2
    exit 2
    ;;
esac
