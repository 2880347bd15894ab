"""Per-GPU-family facts the rest of the evaluator needs.

Every number here is a vendor datasheet figure or an ISA-manual constant (leads, not measurements).
Adding a target means adding one `Target` entry and, if its ISA differs, one parser module under
`evaluator/isa/`.
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Target:
    name: str                      # what users type: "gfx950", "sm90"
    backend: str                   # triton backend: "hip" or "cuda"
    arch: str | int                # GPUTarget arch: "gfx950" or 90
    warp_size: int
    compute_units: int             # CUs (AMD) or SMs (NVIDIA)
    clock_ghz: float               # peak engine clock, datasheet
    simds_per_cu: int              # AMD SIMDs per CU; NVIDIA SM sub-partitions
    max_waves_per_simd: int
    register_file: int             # 32-bit registers: AMD per lane (VGPR+AGPR), NVIDIA per SM
    register_file_unit: str        # what register_file counts per: "lane" or "SM"
    max_registers_per_thread: int
    shared_bytes_per_cu: int       # LDS per CU / shared memory per SM usable by blocks
    last_level_cache_bytes: int    # NVIDIA L2; AMD Infinity Cache (MALL), the last level before HBM
    peak_tflops: dict[str, float] = field(default_factory=dict)  # dense, by operand dtype
    # Matrix-instruction cost: mnemonic prefix -> cycles one instruction keeps the matrix unit busy.
    matrix_cycles: dict[str, int] = field(default_factory=dict)
    devices: tuple[str, ...] = ()  # device names this target covers

    @property
    def gpu_target(self):
        from triton.backends.compiler import GPUTarget

        return GPUTarget(self.backend, self.arch, self.warp_size)


GFX950 = Target(
    name="gfx950",
    backend="hip",
    arch="gfx950",
    warp_size=64,
    compute_units=256,
    clock_ghz=2.4,
    simds_per_cu=4,
    max_waves_per_simd=8,
    register_file=512,
    register_file_unit="lane",
    max_registers_per_thread=512,
    shared_bytes_per_cu=160 * 1024,
    last_level_cache_bytes=256 * 2 ** 20,  # MI355X Infinity Cache
    # MI355X datasheet, dense.
    peak_tflops={"float16": 2516.6, "bfloat16": 2516.6, "float8_e4m3fn": 5033.2, "float8_e5m2": 5033.2,
                 "float4_e2m1": 10066.3},
    # CDNA4 ISA guide cycle counts (the seed's table: 16x16x32 f16 = 16 cycles, 32x32x16 f16 = 32).
    matrix_cycles={
        "v_mfma_f32_16x16x32_f16": 16, "v_mfma_f32_16x16x32_bf16": 16,
        "v_mfma_f32_32x32x16_f16": 32, "v_mfma_f32_32x32x16_bf16": 32,
        "v_mfma_f32_16x16x16_f16": 16, "v_mfma_f32_16x16x16_bf16": 16,
        "v_mfma_f32_32x32x8_f16": 32, "v_mfma_f32_32x32x8_bf16": 32,
        "v_mfma_f32_16x16x32_fp8": 16, "v_mfma_f32_16x16x32_bf8": 16,
        "v_mfma_f32_32x32x16_fp8": 32, "v_mfma_f32_32x32x16_bf8": 32,
        # f8f6f4 family: cost depends on the operand format (fp8 32/64, fp4 16/32).
        "v_mfma_scale_f32_16x16x128_f8f6f4:fp8": 32, "v_mfma_scale_f32_16x16x128_f8f6f4:fp4": 16,
        "v_mfma_scale_f32_32x32x64_f8f6f4:fp8": 64, "v_mfma_scale_f32_32x32x64_f8f6f4:fp4": 32,
        "v_mfma_f32_16x16x128_f8f6f4:fp8": 32, "v_mfma_f32_16x16x128_f8f6f4:fp4": 16,
        "v_mfma_f32_32x32x64_f8f6f4:fp8": 64, "v_mfma_f32_32x32x64_f8f6f4:fp4": 32,
    },
    devices=("AMD Instinct MI355X", "AMD Instinct MI350X"),
)

SM90 = Target(
    name="sm90",
    backend="cuda",
    arch=90,
    warp_size=32,
    compute_units=132,
    clock_ghz=1.83,
    simds_per_cu=4,
    max_waves_per_simd=16,         # 64 warps per SM over 4 sub-partitions
    register_file=65536,
    register_file_unit="SM",
    max_registers_per_thread=255,
    shared_bytes_per_cu=227 * 1024,
    last_level_cache_bytes=60 * 2 ** 20,   # L2; an H200 reports 62914560 bytes
    # H100/H200 SXM datasheet, dense.
    peak_tflops={"float16": 989.4, "bfloat16": 989.4, "float8_e4m3fn": 1978.9, "float8_e5m2": 1978.9,
                 "float32": 66.9},
    # One SM retires 2048 dense 16-bit FMA per clock (989 TF / 132 SMs / 1.83 GHz / 2), so a warpgroup's
    # m64nNk16 keeps the tensor pipe busy N/2 cycles (k32 fp8 the same); `evaluator.isa.sass` computes
    # HGMMA costs from the shape. HMMA (mma.sync, one warp, one quarter of the SM) costs are listed here.
    matrix_cycles={"HMMA.16816": 16, "HMMA.1688": 8},
    devices=("NVIDIA H100", "NVIDIA H200", "NVIDIA GH200"),
)

TARGETS: dict[str, Target] = {t.name: t for t in (GFX950, SM90)}


def get_target(name: str) -> Target:
    try:
        return TARGETS[name]
    except KeyError:
        raise ValueError(f"unknown target {name!r}; known targets: {', '.join(sorted(TARGETS))}") from None
