"""gfx950: AMD Instinct MI350X / MI355X (CDNA4). Facts from the MI355X datasheet and the CDNA4 ISA guide."""
from __future__ import annotations

from ...static_error import StaticErrorModel
from ..amd import AmdToolchain
from ..base import Ladder, Target
from .clocks import CLOCK
from .published import CORRELATION_STAGES, GFX950_FP16, GFX950_LOW_PRECISION, PUBLISHED_BY

TARGET = Target(
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
    shared_bytes_per_block=160 * 1024,
    last_level_cache_bytes=256 * 2 ** 20,  # MI355X Infinity Cache
    toolchain=AmdToolchain(),
    ladder=Ladder(folders=("fp16", "bf8", "mxfp4"), published={**GFX950_FP16, **GFX950_LOW_PRECISION},
                  published_by=PUBLISHED_BY, correlation_stages=CORRELATION_STAGES),
    # MI355X datasheet, dense.
    peak_memory_tbps=8.0,  # MI350X / MI355X datasheet
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
    matrix_cycles_note="an MFMA missing from the table costs 32 cycles for a 32x32 shape, 16 otherwise",
    clock_model=CLOCK,
    # benchmarks/static_model_fidelity.py, set ratio_error: the ten fp16 stages' estimates (each with its
    # leave-one-out clock) against the seed's published TFLOP/s, 45 pairs. Every published stage runs one wave per
    # SIMD and none changes persistence or specialization, so no mechanism beyond one stream's loop is validated.
    static_error=StaticErrorModel(
        log_sigma=0.1479, pairs=45, unvalidated_log_penalty=0.4474, validated_mechanisms=(),
        source="gfx950 ten fp16 stages vs the seed's published TFLOP/s (MI355X, the seed's authors), "
               "leave-one-out clock"),
    devices=("AMD Instinct MI355X", "AMD Instinct MI350X"),
)
