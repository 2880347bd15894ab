"""gfx942: AMD Instinct MI300X / MI325X (CDNA3). Compile-only static analysis on any CPU; the runtime path is
the ROCm one gfx950 uses and has not yet run on an MI300-series GPU.

Sources (vendor figures, not measurements):
- AMD Instinct MI300X datasheet / CDNA3 white paper: 304 CUs (8 XCDs x 38), 2100 MHz peak engine clock,
  64 KiB LDS per CU, 512 VGPRs per lane (arch + accumulation), 256 MiB Infinity Cache, dense peak
  1307.4 TFLOP/s fp16/bf16 and 2614.9 TFLOP/s fp8.
- AMD CDNA3 ISA reference guide, MFMA table, and AMD's ROCm blog "Matrix Core Programming on AMD CDNA3 and
  CDNA4 architecture" (peak = 2*M*N*K * 4 matrix cores * CUs * clock / cycles; its worked example,
  v_mfma_f32_32x32x8_f16 at 32 cycles, gives the 1307 TFLOP/s above). fp16/bf16 MFMAs retire 256 FMA per
  cycle per SIMD (16x16x16: 16 cycles, 32x32x8: 32), fp8 ones twice that (16x16x32: 16, 32x32x16: 32).
"""
from __future__ import annotations

from ..amd import AmdToolchain
from ..base import Ladder, Target

TARGET = Target(
    name="gfx942",
    backend="hip",
    arch="gfx942",
    warp_size=64,
    compute_units=304,
    clock_ghz=2.1,
    simds_per_cu=4,
    max_waves_per_simd=8,
    register_file=512,
    register_file_unit="lane",
    max_registers_per_thread=512,
    shared_bytes_per_cu=64 * 1024,
    shared_bytes_per_block=64 * 1024,
    last_level_cache_bytes=256 * 2 ** 20,  # MI300X Infinity Cache
    toolchain=AmdToolchain(),
    ladder=Ladder(folders=("fp16",)),
    peak_memory_tbps=5.3,  # MI300X datasheet
    peak_tflops={"float16": 1307.4, "bfloat16": 1307.4, "float8_e4m3fnuz": 2614.9, "float8_e5m2fnuz": 2614.9},
    matrix_cycles={
        "v_mfma_f32_16x16x16_f16": 16, "v_mfma_f32_16x16x16_bf16": 16,
        "v_mfma_f32_32x32x8_f16": 32, "v_mfma_f32_32x32x8_bf16": 32,
        "v_mfma_f32_16x16x32_fp8_fp8": 16, "v_mfma_f32_16x16x32_bf8_bf8": 16,
        "v_mfma_f32_32x32x16_fp8_fp8": 32, "v_mfma_f32_32x32x16_bf8_bf8": 32,
    },
    matrix_cycles_note="an MFMA missing from the table costs 32 cycles for a 32x32 shape, 16 otherwise",
    devices=("AMD Instinct MI300X", "AMD Instinct MI325X"),
)
