"""The sm90 BF16 reference ladder (and its FP8 variant): each stage's technique is visible in what ptxas produced.

Every stage is compiled once (benchmark shape, default knobs) for sm_90a on the CPU; the checks read the PTX,
the SASS (nvdisasm of the cubin) and ptxas's resource report. Measured speed lives in
benchmarks/results/sm90_bf16_ladder.json (benchmarks/ladder_gpu.py on an H200), not here.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from evaluator.compile import CompiledKernel, compile_candidate
from evaluator.contract import load_candidate
from evaluator.ladder import stage_paths
from evaluator.targets import get_target
from evaluator.targets.nvidia import sass
from evaluator.targets.nvidia.static import ptxas_arch

pytestmark = [pytest.mark.slow, pytest.mark.compiler]  # compiles every stage of the sm90 ladders

ROOT = Path(__file__).resolve().parent.parent
LADDER = ROOT / "kernels" / "sm90" / "bf16"
FP8 = ROOT / "kernels" / "sm90" / "fp8" / "v09_fp8.py"
STAGES = [p.stem for p in stage_paths(LADDER)]
BENCH_SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192), (8192, 8192, 2048), (16384, 8192, 4096), (256, 8192, 8192)]
SHARED_LIMIT = 227 * 1024  # opt-in dynamic shared memory per block on H100/H200


@dataclass(frozen=True)
class Built:
    module: object
    kernel: CompiledKernel
    ptx: str
    sass: str
    usage: sass.ResourceUsage

    def ops(self, prefix: str) -> int:
        """SASS instructions whose mnemonic starts with `prefix` (predicates ignored)."""
        return len(re.findall(rf"^\s+/\*[0-9a-f]+\*/\s+(?:@!?U?P\w+\s+)?{re.escape(prefix)}", self.sass, re.MULTILINE))


def build(path: Path) -> Built:
    module, spec = load_candidate(path)
    kernels = compile_candidate(module, spec, get_target("sm90"))
    assert len(kernels) == 1
    k = kernels[0]
    return Built(module, k, k.asm["ptx"], sass.disassemble(k.asm["cubin"]), sass.ptxas_resource_usage(k.asm["ptx"], ptxas_arch(get_target("sm90"))))


@pytest.fixture(scope="module")
def ladder() -> dict[str, Built]:
    built = {name[:3]: build(LADDER / f"{name}.py") for name in STAGES}
    built["fp8"] = build(FP8)
    return built


def test_ladder_has_twelve_stages_in_order():
    assert [s[:3] for s in STAGES] == [f"v{i:02d}" for i in range(12)]


@pytest.mark.parametrize("name", STAGES + ["fp8"])
def test_contract_declarations(name):
    path = FP8 if name == "fp8" else LADDER / f"{name}.py"
    module, spec = load_candidate(path)
    assert module.STAGE == (name[:3] if name != "fp8" else "v09-fp8")
    assert module.TECHNIQUE and module.__doc__ and len(module.__doc__) > 300
    assert spec.target == "sm90" and spec.out_dtype == "bfloat16"
    assert spec.dtype == ("float8_e4m3fn" if name == "fp8" else "bfloat16")
    assert set(BENCH_SHAPES) <= set(spec.shapes)
    assert all(spec.supports(s) for s in BENCH_SHAPES)
    assert spec.scales == ("per_tensor" if name == "fp8" else None)


@pytest.mark.parametrize("name", STAGES + ["fp8"])
def test_no_spills_and_fits_shared_memory(ladder, name):
    built = ladder[name[:3]]
    assert built.usage.spill_store_bytes == 0 and built.usage.spill_load_bytes == 0
    assert built.usage.stack_frame_bytes == 0
    assert built.ops("LDL") == 0 and built.ops("STL") == 0
    assert 0 < built.usage.registers <= 255
    assert built.kernel.shared_bytes <= SHARED_LIMIT


def test_v00_uses_register_operand_mma(ladder):
    v00 = ladder["v00"]
    assert v00.ops("HMMA.16816.F32.BF16") > 0
    assert "mma.sync.aligned" in v00.ptx
    assert v00.ops("HGMMA") == 0 and v00.ops("UTMALDG") == 0


def test_v01_uses_wgmma_from_shared_memory(ladder):
    v01 = ladder["v01"]
    assert v01.ops("HGMMA.64x128x16.F32.BF16") > 0 and v01.ops("HMMA") == 0
    assert "wgmma.mma_async" in v01.ptx and "fence.proxy.async" in v01.ptx
    assert v01.ops("LDG") > 0 and v01.ops("UTMALDG") == 0  # operands still come through registers


def test_v02_loads_with_tma_and_an_mbarrier(ladder):
    v02 = ladder["v02"]
    assert v02.ops("UTMALDG.2D") == 2 and v02.ops("LDG") == 0
    assert "mbarrier.try_wait" in v02.ptx and "expect_tx" in v02.ptx


def test_v03_has_a_multi_stage_ring(ladder):
    v02, v03 = ladder["v02"], ladder["v03"]
    stages = v03.module.KNOBS["NUM_STAGES"]
    assert stages >= 2
    assert v03.ptx.count("mbarrier.init") == stages
    assert v03.kernel.shared_bytes >= stages * v02.kernel.shared_bytes - 64
    assert re.search(r"wgmma\.wait_group\.sync\.aligned\s+0", v03.ptx)
    assert not re.search(r"wgmma\.wait_group\.sync\.aligned\s+1", v03.ptx)


def test_v04_keeps_one_wgmma_group_in_flight(ladder):
    assert re.search(r"wgmma\.wait_group\.sync\.aligned\s+1", ladder["v04"].ptx)
    assert ladder["v04"].ops("WARPGROUP.DEPBAR.LE gsb0, 0x1") > 0


def test_v05_uses_a_128x256_tile_over_two_warpgroups(ladder):
    v05 = ladder["v05"]
    assert v05.kernel.num_warps == 8
    assert v05.ops("HGMMA.64x256x16.F32.BF16") > 0
    assert v05.kernel.grid == (4096 // 128, 4096 // 256, 1)


def test_v06_is_persistent(ladder):
    v06 = ladder["v06"]
    tiles = (4096 // 128) * (4096 // 256)
    assert v06.kernel.grid == (132, 1, 1) and tiles > 132
    assert v06.ops("STG") > 0 and v06.ops("UTMASTG") == 0


def test_v07_stores_through_tma(ladder):
    v07 = ladder["v07"]
    assert v07.ops("UTMASTG.2D") == 1 and v07.ops("STG") == 0
    assert re.search(r"cp\.async\.bulk\.wait_group\.read\s+0", v07.ptx)


def test_v08_specializes_warps_and_reallocates_registers(ladder):
    v08 = ladder["v08"]
    assert v08.kernel.num_warps == 12  # 8 consumer warps + the producer, padded to a warpgroup
    assert "setmaxnreg.dec.sync.aligned.u32" in v08.ptx and "setmaxnreg.inc.sync.aligned.u32" in v08.ptx
    assert v08.ops("USETMAXREG") > 0
    assert v08.ops("HGMMA.64x256x16.F32.BF16") > 0 and v08.ops("UTMALDG.2D") == 2


def test_v09_splits_the_epilogue_and_deepens_the_ring(ladder):
    v08, v09 = ladder["v08"], ladder["v09"]
    knobs = v09.module.KNOBS
    assert v09.ops("UTMASTG.2D") == knobs["EPILOGUE_SPLIT"] > 1
    assert knobs["NUM_STAGES"] > v08.module.KNOBS["NUM_STAGES"]
    assert v09.ops("USETMAXREG") > 0


def test_v09_fills_the_grid_on_the_skinny_shape():
    module, spec = load_candidate(LADDER / "v09_tuned.py")
    kernel = compile_candidate(module, spec, get_target("sm90"), shape=(256, 8192, 8192))[0]
    assert kernel.grid == (128, 1, 1)  # 2 x 64 tiles of 128 x 128 instead of 64 tiles of 128 x 256


def test_fp8_uses_e4m3_wgmma_and_scales(ladder):
    fp8 = ladder["fp8"]
    assert fp8.ops("QGMMA.64x256x32.F32.E4M3.E4M3") > 0 and fp8.ops("HGMMA") == 0
    assert "e4m3.e4m3" in fp8.ptx
    assert fp8.ops("LDG") == 2  # the two per-tensor scales, once per CTA


@pytest.mark.parametrize("name", STAGES + ["fp8"])
def test_compiles_at_every_benchmark_shape(name):
    path = FP8 if name == "fp8" else LADDER / f"{name}.py"
    module, spec = load_candidate(path)
    for m, n, k in BENCH_SHAPES:
        kernel = compile_candidate(module, spec, get_target("sm90"), shape=(m, n, k))[0]
        programs = kernel.grid[0] * kernel.grid[1] * kernel.grid[2]
        assert 0 < programs <= m * n // (64 * 64), (m, n, k, kernel.grid)
