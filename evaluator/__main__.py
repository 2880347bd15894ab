"""`python -m evaluator FILE ...` is the scorer alone: the same as `nearpeak eval FILE ...`."""
import sys

from .cli import eval_main

sys.exit(eval_main())
