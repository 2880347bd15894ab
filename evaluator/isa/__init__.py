"""Parsers for compiler output: one module per instruction set (amdgcn for gfx950, sass for sm90)."""
