"""Control-flow graph of one kernel: basic blocks, dominators, natural loops, out-of-line wait stubs.

Generic over the instruction set. An ISA module hands over its instructions with the label each lies
under, plus `BranchRules` that say which instructions branch where; everything else is graph work:

* a natural loop is a back edge u -> h where h dominates u, with every block that reaches u without
  passing through h (back edges to one header make one loop); loops nest by block-set inclusion;
* a retry stub is a loop made only of wait-and-branch instructions that the compiler placed out of line
  (e.g. a `TRYWAIT` spin on an mbarrier after the kernel's EXIT). It runs only when the inline wait did not
  succeed at once, so it belongs to the block that branches to it, not to the loop structure.

The hot loop of a GEMM is then the innermost natural loop that carries matrix instructions.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from .common import Instruction


class BranchRules(Protocol):
    """What an ISA module tells the graph builder about its control-flow instructions."""

    def targets(self, ins: Instruction) -> list[str]:
        """Labels this instruction may branch to (empty for a non-branch or an indirect branch)."""

    def ends_block(self, ins: Instruction) -> bool:
        """True for any branch, exit or return: the next instruction starts a new block."""

    def falls_through(self, ins: Instruction) -> bool:
        """False when control never reaches the next instruction (unconditional branch, exit, return)."""


@dataclass
class Block:
    name: str
    instructions: list[Instruction]
    targets: tuple[str, ...] = ()      # branch targets
    fallthrough: str | None = None     # the next block in text order, when control can fall into it

    @property
    def successors(self) -> tuple[str, ...]:
        return self.targets + ((self.fallthrough,) if self.fallthrough and self.fallthrough not in self.targets else ())


@dataclass(frozen=True)
class NaturalLoop:
    header: str
    blocks: frozenset[str]
    latches: tuple[str, ...]           # sources of the back edges
    depth: int                         # 1 = outermost
    parent: str | None                 # header of the innermost enclosing loop


@dataclass(frozen=True)
class RetryStub:
    """Out-of-line wait loop `blocks` (with the branch-only blocks that lead back) serving block `serves`."""

    header: str
    blocks: frozenset[str]
    serves: str


@dataclass
class ControlFlow:
    blocks: list[Block]
    loops: list[NaturalLoop]           # real loops, outermost first; retry stubs are not among them
    stubs: list[RetryStub] = field(default_factory=list)
    irreducible_edges: list[tuple[str, str]] = field(default_factory=list)  # retreating edges that close no natural loop

    def block(self, name: str) -> Block:
        return self._by_name()[name]

    def _by_name(self) -> dict[str, Block]:
        return {b.name: b for b in self.blocks}

    def stub_blocks(self) -> frozenset[str]:
        return frozenset().union(*(s.blocks for s in self.stubs)) if self.stubs else frozenset()

    def loop_instructions(self, loop: NaturalLoop) -> list[Instruction]:
        """The loop's instructions in text order, nested loops included, out-of-line retry stubs left out
        (their wait already stands inline in the block they serve)."""
        skip = self.stub_blocks()
        return [ins for b in self.blocks if b.name in loop.blocks and b.name not in skip for ins in b.instructions]

    def own_blocks(self, loop: NaturalLoop) -> frozenset[str]:
        """Blocks of `loop` that lie in none of its nested loops."""
        inner = [lp.blocks for lp in self.loops if lp.parent == loop.header]
        return loop.blocks.difference(*inner) - self.stub_blocks()

    def children(self, loop: NaturalLoop) -> list[NaturalLoop]:
        return [lp for lp in self.loops if lp.parent == loop.header]

    def after(self, loop: NaturalLoop) -> list[Instruction]:
        """What runs once per pass of `loop`'s enclosing code, in text order: for a nested loop the enclosing
        loop's own blocks (epilogue and next prologue of a tile loop), for an outermost one every block
        reachable from its exits (the epilogue), retry stubs left out."""
        skip = self.stub_blocks()
        if loop.parent is not None:
            parent = next(lp for lp in self.loops if lp.header == loop.parent)
            names = self.own_blocks(parent)
        else:
            by_name = self._by_name()
            todo = [s for name in loop.blocks for s in by_name[name].successors if s not in loop.blocks]
            names: set[str] = set()
            while todo:
                name = todo.pop()
                if name not in names and name in by_name and name not in skip and name not in loop.blocks:
                    names.add(name)
                    todo += by_name[name].successors
        return [ins for b in self.blocks if b.name in names and b.name not in skip for ins in b.instructions]

    def innermost_carrying(self, predicate: Callable[[str], bool]) -> NaturalLoop | None:
        """The innermost loop whose instructions include ones matching `predicate` (a mnemonic test): among
        loops with such instructions and no nested loop that has them, the one with the most (on a tie the
        smaller body, then the first in text order)."""
        def count(lp: NaturalLoop) -> int:
            return sum(1 for ins in self.loop_instructions(lp) if predicate(ins.mnemonic))

        carrying = {lp.header: lp for lp in self.loops if count(lp) > 0}
        innermost = [lp for lp in carrying.values() if not any(
            c.header in carrying for c in self._descendants(lp))]
        if not innermost:
            return None
        return max(innermost, key=lambda lp: (count(lp), -len(self.loop_instructions(lp))))

    def _descendants(self, loop: NaturalLoop) -> list[NaturalLoop]:
        out, todo = [], self.children(loop)
        while todo:
            lp = todo.pop()
            out.append(lp)
            todo += self.children(lp)
        return out


def build_blocks(labelled: Sequence[tuple[str | None, Instruction]], rules: BranchRules,
                 entry_name: str = "entry") -> list[Block]:
    """Split a labelled instruction stream into basic blocks: a block starts at each new label and after
    each block-ending instruction; a block with no label of its own is named `<label>+<n>`."""
    blocks: list[Block] = []
    current: Block | None = None
    last_label: object = object()  # no label seen yet
    unnamed = 0
    ended = False
    for label, ins in labelled:
        if label != last_label or ended or current is None:
            if label != last_label or current is None:
                name, unnamed = label or entry_name, 0
            else:
                unnamed += 1
                name = f"{label or entry_name}+{unnamed}"
            current = Block(name, [])
            blocks.append(current)
            last_label = label
        current.instructions.append(ins)
        ended = rules.ends_block(ins)
    for n, block in enumerate(blocks):
        targets: list[str] = []
        falls = True
        for ins in block.instructions:
            targets += [t for t in rules.targets(ins) if t not in targets]
        if block.instructions and rules.ends_block(block.instructions[-1]):
            falls = rules.falls_through(block.instructions[-1])
        block.targets = tuple(targets)
        block.fallthrough = blocks[n + 1].name if falls and n + 1 < len(blocks) else None
    return blocks


def _depth_first(blocks: Sequence[Block], succ: dict[str, tuple[str, ...]]) -> tuple[list[str], list[tuple[str, str]]]:
    """Reverse postorder from the first block, and the retreating edges (to a block still on the DFS path)."""
    order, seen, on_path, retreating = [], {blocks[0].name}, {blocks[0].name}, []
    stack = [(blocks[0].name, iter(succ[blocks[0].name]))]
    while stack:
        node, children = stack[-1]
        for child in children:
            if child not in succ:
                continue
            if child in on_path:
                retreating.append((node, child))
            elif child not in seen:
                seen.add(child)
                on_path.add(child)
                stack.append((child, iter(succ[child])))
                break
        else:
            order.append(node)
            on_path.discard(node)
            stack.pop()
    return order[::-1], retreating


def immediate_dominators(blocks: Sequence[Block]) -> dict[str, str | None]:
    """Immediate dominator of every block reachable from the first one (Cooper, Harvey and Kennedy's
    iterative algorithm); the entry maps to None, unreachable blocks are absent."""
    if not blocks:
        return {}
    succ = {b.name: b.successors for b in blocks}
    rpo, _ = _depth_first(blocks, succ)
    index = {name: i for i, name in enumerate(rpo)}
    preds: dict[str, list[str]] = {name: [] for name in rpo}
    for name in rpo:
        for s in succ[name]:
            if s in preds:
                preds[s].append(name)
    entry = rpo[0]
    idom: dict[str, str | None] = {entry: entry}

    def intersect(a: str, b: str) -> str:
        while a != b:
            while index[a] > index[b]:
                a = idom[a]
            while index[b] > index[a]:
                b = idom[b]
        return a

    changed = True
    while changed:
        changed = False
        for name in rpo[1:]:
            done = [p for p in preds[name] if p in idom]
            new = done[0]
            for p in done[1:]:
                new = intersect(p, new)
            if idom.get(name) != new:
                idom[name] = new
                changed = True
    idom[entry] = None
    return idom


def dominates(idom: dict[str, str | None], a: str, b: str) -> bool:
    """Does block `a` dominate block `b` (every path from the entry to b passes through a)?"""
    node: str | None = b
    while node is not None:
        if node == a:
            return True
        node = idom.get(node)
    return False


def natural_loops(blocks: Sequence[Block]) -> tuple[list[NaturalLoop], list[tuple[str, str]]]:
    """Natural loops (outermost first, then text order) and the retreating edges that close none."""
    idom = immediate_dominators(blocks)
    preds: dict[str, list[str]] = {b.name: [] for b in blocks if b.name in idom}
    for b in blocks:
        if b.name in idom:
            for s in b.successors:
                if s in preds:
                    preds[s].append(b.name)
    position = {b.name: n for n, b in enumerate(blocks)}
    bodies: dict[str, set[str]] = {}
    latches: dict[str, list[str]] = {}
    for b in blocks:
        if b.name not in idom:
            continue
        for s in b.successors:
            if s in idom and dominates(idom, s, b.name):
                body = bodies.setdefault(s, {s})
                latches.setdefault(s, []).append(b.name)
                todo = [b.name]
                while todo:
                    node = todo.pop()
                    if node not in body:
                        body.add(node)
                        todo += preds[node]
    _, retreating = _depth_first(blocks, {b.name: b.successors for b in blocks})
    irreducible = [(u, v) for u, v in retreating if not dominates(idom, v, u)]
    headers = sorted(bodies, key=lambda h: (-len(bodies[h]), position[h]))
    loops: dict[str, NaturalLoop] = {}
    for h in headers:  # larger bodies first, so every enclosing loop exists before the loops it holds
        enclosing = [o for o in loops.values() if h in o.blocks and bodies[h] <= o.blocks]
        parent = min(enclosing, key=lambda o: len(o.blocks)) if enclosing else None
        loops[h] = NaturalLoop(h, frozenset(bodies[h]), tuple(latches[h]), parent.depth + 1 if parent else 1,
                               parent.header if parent else None)
    ordered = sorted(loops.values(), key=lambda lp: (lp.depth, position[lp.header]))
    return ordered, irreducible


def _retry_stubs(blocks: Sequence[Block], loops: Iterable[NaturalLoop],
                 is_spin: Callable[[Instruction], bool]) -> list[RetryStub]:
    """Loops made only of spin instructions (waits and branches) that are entered by a branch from one
    block outside them, not by falling into them: out-of-line retry stubs."""
    by_name = {b.name: b for b in blocks}
    preds: dict[str, list[str]] = {b.name: [] for b in blocks}
    for b in blocks:
        for s in b.successors:
            if s in preds:
                preds[s].append(b.name)
    stubs = []
    for lp in loops:
        if not all(is_spin(ins) for name in lp.blocks for ins in by_name[name].instructions):
            continue
        outside = [p for p in preds[lp.header] if p not in lp.blocks]
        if len(outside) != 1 or by_name[outside[0]].fallthrough == lp.header:
            continue  # an inline spin loop runs on every pass: it stays part of the code around it
        # Branch-only blocks that lead out of the stub and are reached from nowhere else belong to it too.
        members = set(lp.blocks)
        grew = True
        while grew:
            grew = False
            for b in blocks:
                if b.name in members or not b.instructions or not all(is_spin(i) for i in b.instructions):
                    continue
                if preds[b.name] and all(p in members for p in preds[b.name]):
                    members.add(b.name)
                    grew = True
        stubs.append(RetryStub(lp.header, frozenset(members), outside[0]))
    return stubs


def analyze(labelled: Sequence[tuple[str | None, Instruction]], rules: BranchRules,
            is_spin: Callable[[Instruction], bool] = lambda ins: False) -> ControlFlow:
    """Blocks, natural loops and retry stubs of one kernel's instruction stream."""
    blocks = build_blocks(labelled, rules)
    if not blocks:
        return ControlFlow([], [])
    loops, irreducible = natural_loops(blocks)
    stubs = _retry_stubs(blocks, loops, is_spin)
    stub_headers = {s.header for s in stubs}
    kept = _renest([lp for lp in loops if lp.header not in stub_headers])
    return ControlFlow(blocks, kept, stubs, irreducible)


def _renest(loops: list[NaturalLoop]) -> list[NaturalLoop]:
    """Parent links and depths again after retry stubs were taken out of the loop list."""
    by_header = {lp.header: lp for lp in loops}

    def parent_of(lp: NaturalLoop) -> str | None:
        return lp.parent if lp.parent in by_header else None

    def depth_of(lp: NaturalLoop) -> int:
        parent = parent_of(lp)
        return 1 if parent is None else 1 + depth_of(by_header[parent])

    return [NaturalLoop(lp.header, lp.blocks, lp.latches, depth_of(lp), parent_of(lp)) for lp in loops]
