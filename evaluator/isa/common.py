"""What every ISA parser produces: instructions grouped into basic blocks and loops."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Instruction:
    mnemonic: str
    operands: str
    line: int          # 1-based line in the assembly text
    guard: str = ""    # predicate the instruction runs under ("@!P0" in SASS), "" when it always runs

    @property
    def text(self) -> str:
        return f"{self.mnemonic} {self.operands}".strip()


@dataclass
class Loop:
    """A loop of the kernel: its header label and the instructions of all its blocks, in text order."""

    header: str
    depth: int
    instructions: list[Instruction] = field(default_factory=list)

    def excerpt(self, limit: int = 80) -> str:
        lines = [ins.text for ins in self.instructions[:limit]]
        if len(self.instructions) > limit:
            lines.append(f"... ({len(self.instructions) - limit} more instructions)")
        return "\n".join(lines)

