"""`nearpeak`: one command, several subcommands.

Each subcommand lives with the code it drives; this module only assembles them. A module adds its
subcommands through `register(subparsers)`, and each parser sets `func(args) -> int` (the exit code).
"""
from __future__ import annotations

import argparse
import importlib
import sys

from evaluator.errors import EXIT_USAGE

# Modules that contribute subcommands, in the order `nearpeak --help` lists them.
COMMAND_MODULES = ("evaluator.cli", "agent.commands")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="nearpeak",
        description="Agent-driven optimization of Gluon GEMM kernels for gfx950 (MI350/MI355) and sm90 (H100/H200).")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:
                raise
            continue
        module.register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    try:
        return int(args.func(args) or 0)
    except BrokenPipeError:  # output piped into `head` and closed early
        sys.stderr.close()
        return 0
    except KeyboardInterrupt:
        print("nearpeak: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
