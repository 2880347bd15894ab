"""Cheating and broken candidates for the evaluator, with a manifest (cases.py) and a runner (runner.py)."""
