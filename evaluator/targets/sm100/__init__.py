"""sm100: NVIDIA B200 (Blackwell). Compile-only static analysis; nearpeak's runtime path has not run on one.

Sources (vendor figures, not measurements): NVIDIA HGX B200 (1000 W) specifications: 148 SMs, dense
tensor peak 2250 TFLOP/s fp16/bf16 and 4500 fp8, a tensor clock of about 1.86 GHz; 2250 TFLOP/s over 148 SMs
at 1.86 GHz is 4096 dense 16-bit FMA per SM per clock, twice Hopper's. Chips and Cheese's B200 article: the
256 KiB L1/shared pool per SM is Hopper's (228 KiB shared at most, 227 KiB for one block) and the L2 is
126 MB. A warp's mma.sync (HMMA.16816) is assumed to run at Hopper's per-warp rate (an assumption, not a
published figure: tcgen05 is the instruction the doubled rate is quoted for); tcgen05 MMAs (UTC*MMA) carry
their shape in a descriptor, not in the SASS text, so the static model counts but does not cost them.
"""
from __future__ import annotations

from ..base import Ladder, Target
from ..nvidia import NvidiaToolchain

TARGET = Target(
    name="sm100",
    backend="cuda",
    arch=100,
    warp_size=32,
    compute_units=148,
    clock_ghz=1.86,
    simds_per_cu=4,
    max_waves_per_simd=16,         # 64 warps per SM over 4 sub-partitions
    register_file=65536,
    register_file_unit="SM",
    max_registers_per_thread=255,
    shared_bytes_per_cu=228 * 1024,
    shared_bytes_per_block=227 * 1024,
    last_level_cache_bytes=126 * 10 ** 6,
    toolchain=NvidiaToolchain(),
    ladder=Ladder(folders=("bf16",)),
    peak_memory_tbps=8.0,  # B200 datasheet
    peak_tflops={"float16": 2250.0, "bfloat16": 2250.0, "float8_e4m3fn": 4500.0, "float8_e5m2": 4500.0},
    matrix_cycles={"HMMA.16816": 4, "HMMA.1688": 2},
    matrix_cycles_note="tcgen05 MMAs (UTCHMMA/UTCQMMA) are counted but not costed: their shape is in a descriptor",
    devices=("NVIDIA B200",),
)
