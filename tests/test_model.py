"""The static issue model responds to what the compiled loop does, in the direction the hardware would."""
from __future__ import annotations

from evaluator.isa.common import Instruction
from evaluator.targets import get_target
from evaluator.targets.amd.model import AmdCosts, _lds_bytes, estimate_amdgcn, mfma_cycles
from evaluator.targets.nvidia.model import NvCosts, estimate_sass

GFX950 = get_target("gfx950")
SM90 = get_target("sm90")


def ins(text: str) -> Instruction:
    mnemonic, _, operands = text.partition(" ")
    return Instruction(mnemonic, operands, 0)


MFMA = "v_mfma_f32_16x16x32_f16 a[0:3], v[0:3], v[4:7], a[0:3]"


def amd(lines: list[str]) -> float:
    return estimate_amdgcn([ins(t) for t in lines], GFX950.matrix_cycles).estimated_efficiency


def test_a_loop_of_only_mfmas_keeps_the_matrix_unit_busy():
    assert amd([MFMA] * 16) > 0.95


def test_waiting_on_this_iterations_loads_is_slower_than_prefetching():
    loads = ["buffer_load_dwordx4 v[0:3], v8, s[0:3], 0 offen"] * 4
    for mfmas in (16, 128):
        exposed = amd(loads + ["s_waitcnt vmcnt(0)"] + [MFMA] * mfmas)
        # Waiting until 4 loads remain in flight: only the previous iteration's loads must have landed.
        prefetched = amd(loads + ["s_waitcnt vmcnt(4)"] + [MFMA] * mfmas)
        assert exposed < prefetched
    # 128 MFMAs (2048 cycles) outlast the load latency: one iteration of prefetch hides it entirely.
    assert exposed < 0.7 and prefetched > 0.95


def test_bank_conflicts_slow_lds_bound_loops():
    body = [ins(t) for t in ["ds_read_b128 v[0:3], v9"] * 16 + ["s_waitcnt lgkmcnt(0)"] + [MFMA] * 4]
    clean = estimate_amdgcn(body, GFX950.matrix_cycles, AmdCosts(bank_conflict_ways=1))
    conflicted = estimate_amdgcn(body, GFX950.matrix_cycles, AmdCosts(bank_conflict_ways=4))
    assert conflicted.estimated_efficiency < clean.estimated_efficiency


def test_scaled_mfma_cost_follows_operand_format():
    op = "v_mfma_scale_f32_16x16x128_f8f6f4 a[0:3], v[0:7], v[8:15], a[0:3], v16, v17"
    assert mfma_cycles(ins(op), GFX950.matrix_cycles) == 32                      # fp8 (no cbsz/blgp)
    assert mfma_cycles(ins(op + " cbsz:4 blgp:4"), GFX950.matrix_cycles) == 16   # fp4 x fp4
    assert mfma_cycles(ins(op + " cbsz:1 blgp:4"), GFX950.matrix_cycles) == 32   # bf8 x fp4: the 8-bit rate


def test_lds_widths():
    assert [_lds_bytes(m) for m in ("ds_read_b128", "ds_write_b64", "ds_read_u8", "ds_read_b64_tr_b16")] == \
        [16, 8, 1, 8]


def test_sm90_synchronous_global_loads_are_exposed_but_a_tma_ring_hides_them():
    hgmma = "HGMMA.64x128x16.F32.BF16 R24, gdesc[UR4], R24, gsb0"
    sync = [ins(t) for t in ["LDG.E.128 R4, desc[UR6][R2.64]", "STS.128 [R5], R4", "BAR.SYNC.DEFER_BLOCKING 0x0",
                             "WARPGROUP.ARRIVE", hgmma, "WARPGROUP.DEPBAR.LE gsb0, 0x0"]]
    ring = [ins(t) for t in ["SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [UR8], R3", "WARPGROUP.ARRIVE", *[hgmma] * 8,
                             "WARPGROUP.DEPBAR.LE gsb0, 0x1", "UTMALDG.2D [UR16], [UR4]"]]
    assert estimate_sass(sync, SM90.matrix_cycles).estimated_efficiency < 0.2
    # 8 wgmmas (512 cycles) per stage and 3 stages in flight cover an unloaded 800-cycle TMA latency ...
    unloaded = NvCosts(tma_latency=800, gmem_latency=800)
    assert estimate_sass(ring, SM90.matrix_cycles, prologue_tma=3, costs=unloaded).estimated_efficiency > 0.9
    assert estimate_sass(ring, SM90.matrix_cycles, prologue_tma=0, costs=unloaded).estimated_efficiency < 0.5
    # ... but not the latency under a full GEMM's load (the fitted default): that takes a deeper ring.
    loaded = [estimate_sass(ring, SM90.matrix_cycles, prologue_tma=n).estimated_efficiency for n in (2, 3, 4, 5)]
    assert loaded == sorted(loaded) and loaded[1] < 0.8 and loaded[-1] > 0.95


def test_sm90_a_producer_partition_feeds_the_consumer_loop_from_its_ring():
    hgmma = "HGMMA.64x256x16.F32.BF16 R24, gdesc[UR4], R24, gsb0"
    consumer = [ins(t) for t in ["SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [UR8], R3", "WARPGROUP.ARRIVE", *[hgmma] * 4,
                                 "WARPGROUP.DEPBAR.LE gsb0, 0x1", "SYNCS.ARRIVE.TRANS64.A1T0 RZ, [UR7], RZ"]]
    # 512-cycle iterations: the further ahead the producer runs, the more of the copy latency it hides.
    by_lead = [estimate_sass(consumer, SM90.matrix_cycles, producer_lead=n) for n in (1, 2, 3, 5)]
    efficiency = [e.estimated_efficiency for e in by_lead]
    assert efficiency == sorted(efficiency) and efficiency[-1] > 0.95
    assert by_lead[0].estimated_efficiency < 0.4 and by_lead[0].bound == "tma_wait"
