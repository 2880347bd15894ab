"""A readable view of a hot loop for a person or a model: in full when short, else compressed.

The compressed view keeps, in program order, every instruction the ISA module marks as structural (matrix
instructions, waits, barriers, LDS/shared-memory accesses, for the usual GEMM reading) and replaces each run
of other instructions by one line that counts them by mnemonic, so the schedule stays visible however long
the loop is. Target-neutral: the ISA module supplies the `keep` predicate over instructions.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence

from .common import Instruction

FULL_LIMIT = 160          # a loop this short is shown whole
RUN_MNEMONICS = 3         # most frequent mnemonics named in an elided run's line


def loop_view(instructions: Sequence[Instruction], keep: Callable[[Instruction], bool],
              full_limit: int = FULL_LIMIT) -> str:
    """The loop's instructions, one per line; compressed (see the module docstring) above `full_limit`."""
    if len(instructions) <= full_limit:
        return "\n".join(ins.text for ins in instructions)
    lines: list[str] = []
    run: Counter = Counter()

    def flush() -> None:
        if run:
            named = ", ".join(f"{n} {m}" for m, n in run.most_common(RUN_MNEMONICS))
            rest = sum(run.values()) - sum(n for _, n in run.most_common(RUN_MNEMONICS))
            lines.append(f"    ... {sum(run.values())} other instruction(s) elided: {named}"
                         + (f", {rest} more" if rest else ""))
            run.clear()

    for ins in instructions:
        if keep(ins):
            flush()
            lines.append(ins.text)
        else:
            run[ins.mnemonic] += 1
    flush()
    return "\n".join(lines)
