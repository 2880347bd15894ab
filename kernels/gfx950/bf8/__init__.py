"""gfx950 BF8 (fp8 e5m2) reference kernel on the f8f6f4 scaled MFMA."""
