"""nearpeak's evaluator: compile-only static analysis for every registered target, runtime checks on a GPU."""

SCHEMA_VERSION = "nearpeak.eval/2"

# torch warns on import when NumPy is absent, which a CPU-only install of nearpeak leaves out on purpose: the
# evaluator hands tensors to torch only, never arrays. Every nearpeak process (CLI, sandboxed children)
# imports this package before torch, so the filter set here silences that warning everywhere.
import warnings as _warnings

_warnings.filterwarnings("ignore", message="Failed to initialize NumPy", category=UserWarning)
