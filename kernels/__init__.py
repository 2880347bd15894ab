"""Candidate kernels: reference ladders per target and data type, each file one contract kernel."""
