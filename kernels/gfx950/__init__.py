"""gfx950 (MI350/MI355, CDNA4) kernels."""
