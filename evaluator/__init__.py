"""nearpeak's evaluator: compile-only static analysis for gfx950 and sm90, runtime checks on a GPU."""

SCHEMA_VERSION = "nearpeak.eval/1"
