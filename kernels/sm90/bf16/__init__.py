"""The sm90 BF16 GEMM ladder, v00 (register-operand MMA) to v09 (tuned, warp-specialized wgmma)."""
