"""gfx950 MXFP4 reference kernels: v00 scale pipeline through registers, v01 scales straight to LDS."""
