"""The v10 sm90 stages: decision table, split-K's SASS, the policy, and (on an H200) correctness, reproducibility
and host time per launch against torch.matmul."""
from __future__ import annotations

import re
import statistics
from pathlib import Path

import pytest
import torch

from evaluator.compile import compile_candidate
from evaluator.contract import load_candidate
from evaluator.policy import check_policy
from evaluator.runtime import correctness as corr
from evaluator.runtime import timing
from evaluator.targets import get_target
from evaluator.targets.nvidia import sass
from evaluator.targets.nvidia.static import ptxas_arch

pytestmark = pytest.mark.compiler  # reads real compiler output: CI runs it on two Triton releases

ROOT = Path(__file__).resolve().parents[1]
BF16 = ROOT / "kernels" / "sm90" / "bf16" / "v10_split_k.py"
FP8 = ROOT / "kernels" / "sm90" / "fp8" / "v10_fp8_split_k.py"
SMS = 132


def table(path: Path, shape, **overrides):
    module, spec = load_candidate(path)
    knobs = {**spec.knobs, **overrides}
    names = ("BLOCK_M", "BLOCK_N", "BLOCK_K", "NUM_STAGES", "EPILOGUE_SPLIT", "FIT_GRID", "SPLIT_K",
             "MIN_SPLIT_STEPS")
    return module.schedule(*shape, SMS, *(knobs[n] for n in names))


@pytest.mark.parametrize("path", [BF16, FP8], ids=["bf16", "fp8"])
def test_decision_table_rows(path):
    square = table(path, (4096, 4096, 4096))
    assert (square.block_n, square.split_k, square.num_stages, square.grid) == (256, 1, 4, SMS)
    skinny = table(path, (256, 8192, 8192))  # 64 full tiles, 128 half-width: half-width, not split-K
    assert (skinny.block_n, skinny.split_k, skinny.num_stages, skinny.grid) == (128, 1, 6, 128)
    few = table(path, (512, 1024, 16384))   # 16 full tiles, 32 half-width, long K: split-K
    assert few.block_n == 256 and few.split_k == 4 and few.epilogue_split == 4 and few.grid == 64
    short_k = table(path, (512, 1024, 512))  # too few K steps to cut
    assert short_k.split_k == 1 and short_k.block_n == 128
    assert table(path, (512, 1024, 16384), SPLIT_K=1).split_k == 1
    assert table(path, (1000, 1016, 1008), SPLIT_K=2).split_k == 2
    assert table(path, (256, 8192, 8192), FIT_GRID=0).block_n == 256


def test_split_is_a_power_of_two_that_fills_three_quarters():
    module, _ = load_candidate(BF16)
    assert module.choose_split(16, 256, SMS, 16) == 4      # capped at MAX_SPLIT_K
    assert module.choose_split(40, 256, SMS, 16) == 4      # 80 < 99, 160 >= 99
    assert module.choose_split(64, 256, SMS, 16) == 2
    assert module.choose_split(64, 16, SMS, 16) == 1       # each range would get fewer than 16 steps
    assert all(module.choose_split(t, 1024, SMS, 4) in (1, 2, 4) for t in range(1, 200))


@pytest.mark.parametrize("path", [BF16, FP8], ids=["bf16", "fp8"])
def test_v10_passes_the_candidate_policy(path):
    assert check_policy(path) == []


def built(path: Path, shape):
    module, spec = load_candidate(path)
    (kernel,) = compile_candidate(module, spec, get_target("sm90"), shape=shape)
    text = sass.disassemble(kernel.asm["cubin"])
    return kernel, text, sass.ptxas_resource_usage(kernel.asm["ptx"], ptxas_arch(get_target("sm90")))


def count(text: str, prefix: str) -> int:
    return len(re.findall(rf"^\s+/\*[0-9a-f]+\*/\s+(?:@!?U?P\w+\s+)?{re.escape(prefix)}", text, re.MULTILINE))


@pytest.mark.slow
@pytest.mark.parametrize("path,mma", [(BF16, "HGMMA.64x256x16.F32.BF16"), (FP8, "QGMMA.64x256x32.F32.E4M3.E4M3")],
                         ids=["bf16", "fp8"])
def test_split_k_variant_publishes_partials_and_counts_arrivals(path, mma):
    kernel, text, usage = built(path, (512, 1024, 16384))
    assert kernel.grid == (64, 1, 1)
    assert count(text, mma) > 0
    assert count(text, "STG.E.64") == 64                    # 4 slices x 16 pairs per thread
    assert count(text, "ATOMG.E.ADD.STRONG.GPU") == 1       # one arrival per unit
    assert count(text, "MEMBAR.ALL.GPU") >= 1               # the release half of acq_rel
    assert count(text, "LDG.E.64.STRONG.GPU") == 4 * 4 * 16  # S = 4 partials x 4 slices x 16 pairs
    assert usage.spill_store_bytes == 0 and usage.stack_frame_bytes == 0 and count(text, "LDL") == 0
    assert kernel.shared_bytes <= 227 * 1024


@pytest.mark.slow
def test_skinny_shape_uses_half_width_tiles_without_split():
    kernel, text, usage = built(BF16, (256, 8192, 8192))
    assert kernel.grid == (128, 1, 1)
    assert count(text, "HGMMA.64x128x16.F32.BF16") > 0 and count(text, "ATOMG") == 0
    assert count(text, "UTMASTG") == 2 and usage.spill_store_bytes == 0


def test_host_time_per_call_on_the_cpu_clock():
    timer = timing.Timer("cpu")
    spent = timing.host_us_per_call(timer, lambda i: sum(range(2000)), calls=20)
    assert 0 < spent < 1e5


def has_sm90() -> bool:
    return torch.cuda.is_available() and not torch.version.hip and torch.cuda.get_device_capability(0) == (9, 0)


@pytest.mark.gpu
@pytest.mark.skipif(not has_sm90(), reason="needs an sm90 GPU")
@pytest.mark.parametrize("path", [BF16, FP8], ids=["bf16", "fp8"])
@pytest.mark.parametrize("shape,knobs", [((512, 1024, 16384), {}), ((1000, 1016, 1008), {"SPLIT_K": 2}),
                                         ((1000, 1016, 1008), {}), ((256, 8192, 8192), {})])
def test_v10_is_correct_and_bitwise_reproducible(path, shape, knobs):
    module, spec = load_candidate(path)
    device = torch.device("cuda")
    args = corr.make_arguments(spec, shape, device, corr.generator_for(device, 7))
    outs = []
    for _ in range(3):
        corr.poison(args["c"])
        module.launch(**args, **{**spec.knobs, **knobs})
        torch.cuda.synchronize()
        outs.append(args["c"].clone())
    check = corr.judge_output(args, spec, shape)
    assert check.ok, check.describe()
    assert all(torch.equal(outs[0], o) for o in outs[1:])


@pytest.mark.gpu
@pytest.mark.skipif(not has_sm90(), reason="needs an sm90 GPU")
def test_v10_host_time_per_call_is_close_to_torch_matmul():
    module, spec = load_candidate(BF16)
    device = torch.device("cuda")
    args = corr.make_arguments(spec, (512, 512, 512), device, corr.generator_for(device, 3))
    out = torch.empty_like(args["c"])
    timer = timing.Timer(device)
    ours = lambda i: module.launch(**args, **spec.knobs)
    vendor = lambda i: torch.matmul(args["a"], args["b"].t(), out=out)
    ours(0), vendor(0)
    rounds = [(timing.host_us_per_call(timer, ours, 200), timing.host_us_per_call(timer, vendor, 200))
              for _ in range(5)]
    ratio = statistics.median(o for o, _ in rounds) / statistics.median(v for _, v in rounds)
    assert ratio <= 1.3, rounds
    graphs = timing.graph_times({"ours": ours, "vendor": vendor}, device, per_graph=10, replays=10)
    assert isinstance(graphs["ours"], timing.Summary) and graphs["ours"].median_ms > 0
