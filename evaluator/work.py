"""The matrix work a kernel issues, read from its TTGIR: per K-loop iteration, per tile, and how much of it is useful.

TTGIR is the same dialect for every target (`tt.dot`, `tt.dot_scaled`, `ttng.warp_group_dot`), written per CTA
with whole-tile tensor types, so it answers without any ISA detail:

* which `scf.for` is the K loop (the innermost loop holding matrix ops) and whether a tile loop encloses it
  (a persistent kernel);
* the accumulation chains in that loop (an op whose accumulator is another op's result continues its chain):
  the deepest chain's summed K is the K advanced per iteration, the chains' M x N the area they accumulate;
* chains fed by the same operand pair as an earlier chain accumulate the same product again: wasted work;
* the bytes of the distinct operand tiles the iteration reads (what the memory system must deliver);
* the elements the tile's epilogue stores (outside the K loop, in the region around it);
* warp specialization: the partition that runs the K loop (consumer) and the others (producers), with warps.
"""
from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass, field

_DOT = re.compile(r"^\s*(%[\w#.]+)\s*=\s*(tt\.dot_scaled|tt\.dot|ttng\.warp_group_dot)\s+(.*)$")
_SHAPE = re.compile(r"(?:tensor|memdesc)<(\d+(?:x\d+)+)x([a-z!][\w.]*)")
_MODULE_WARPS = re.compile(r'"ttg\.num-warps"\s*=\s*(\d+)')
_PART_WARPS = re.compile(r"num_warps\((\d+)\)")
_STORE = re.compile(r"^\s*(?:tt\.store|amdg\.buffer_store|ttng\.async_tma_copy_local_to_global)\b(.*)$")
_RING = re.compile(r"ttg\.local_alloc\b.*->\s*!ttg\.memdesc<(\d+)x\d+x\d+x(\w+)")
_OPEN_KIND = re.compile(r"\b(scf\.for|scf\.if|scf\.while|default|partition\d+|tt\.func)\b")


_ELEMENT_BYTES = {"f64": 8, "f32": 4, "i32": 4, "f16": 2, "bf16": 2, "i16": 2, "i8": 1, "ui8": 1}


def _element_bytes(name: str) -> float:
    return 1.0 if name.startswith("f8") else _ELEMENT_BYTES.get(name, 2)


@dataclass(frozen=True)
class MatrixOp:
    line: int
    result: str
    a: str
    b: str
    acc: str
    m: int
    n: int
    k: int
    a_bytes: float = 0.0              # the operand tiles as stored (fp4 packed two per byte)
    b_bytes: float = 0.0

    @property
    def flops(self) -> int:
        return 2 * self.m * self.n * self.k


@dataclass
class _Region:
    kind: str
    line: int
    header: str
    parent: _Region | None
    warps: int | None = None
    ops: list[MatrixOp] = field(default_factory=list)
    stored_elements: int = 0
    children: list[_Region] = field(default_factory=list)

    def ancestors(self):
        node = self.parent
        while node is not None:
            yield node
            node = node.parent


@dataclass(frozen=True)
class MatrixWork:
    """Per CTA. `None` fields: the TTGIR had no K loop with matrix ops."""

    k_loop_line: int | None
    ops_per_iteration: int
    flops_per_iteration: int          # issued matrix FLOPs of one K-loop iteration
    k_per_iteration: int              # K advanced per iteration (deepest accumulation chain)
    chains: int
    accumulated_area: int             # sum of the chains' M x N
    distinct_area: int                # the same, counting chains with a repeated operand pair once
    operand_bytes_per_iteration: float  # distinct A and B tiles the iteration's matrix ops read
    ring_depth: int                   # slots of the deepest multi-buffered shared allocation (1: none)
    stored_elements: int | None       # elements stored per tile outside the K loop (None: no store seen)
    persistent: bool                  # a loop around the K loop walks several tiles per CTA
    warp_specialized: bool
    consumer_warps: int               # warps of the partition that runs the K loop
    total_warps: int                  # all partitions

    @property
    def useful_area(self) -> int:
        """Output elements one tile produces: accumulated without repeats, and no more than it stores."""
        area = self.distinct_area
        return min(area, self.stored_elements) if self.stored_elements else area

    def to_dict(self) -> dict:
        return {**asdict(self), "useful_area": self.useful_area}


def _dims(type_text: str) -> tuple[list[int], str] | None:
    m = _SHAPE.search(type_text)
    if not m:
        return None
    return [int(d) for d in m.group(1).split("x")], m.group(2)


def _operands(rest: str) -> list[str]:
    return re.findall(r"%[\w#.]+", rest.split(":", 1)[0])


def _parse_dot(line_no: int, result: str, op: str, rest: str) -> MatrixOp | None:
    names = _operands(rest)
    types = rest.rsplit(":", 1)[-1] if op != "tt.dot_scaled" else rest.split(":", 1)[1]
    shapes = _SHAPE.findall(types)
    if len(shapes) < 2:
        return None
    out = [int(d) for d in shapes[-1][0].split("x")]
    a_dims, a_elem = [int(d) for d in shapes[0][0].split("x")], shapes[0][1]
    k = a_dims[-1]
    if op == "tt.dot_scaled":
        a, b, acc = names[0], names[2], names[4]
        b_shape = shapes[2]
        fmt = re.search(r"lhs\s*=\s*(\w+)", rest)
        if fmt and fmt.group(1) == "e2m1" and a_elem in ("i8", "ui8"):
            k *= 2  # two fp4 values per byte
    else:
        a, b, acc = names[0], names[1], names[2]
        b_shape = shapes[1]
    a_bytes = math.prod(a_dims) * _element_bytes(a_elem)
    b_bytes = math.prod(int(d) for d in b_shape[0].split("x")) * _element_bytes(b_shape[1])
    return MatrixOp(line_no, result, a, b, acc, out[-2], out[-1], k, a_bytes, b_bytes)


def _regions(ttgir: str) -> _Region:
    root = _Region("module", 0, "", None)
    module_warps = _MODULE_WARPS.search(ttgir)
    root.warps = int(module_warps.group(1)) if module_warps else None
    stack = [root]
    for no, raw in enumerate(ttgir.splitlines(), 1):
        line = raw.strip()
        if line.startswith(("#", "loc(")):
            continue
        if line.startswith("}"):
            if len(stack) > 1:
                stack.pop()
            if not line.endswith("{"):
                continue
        current = stack[-1]
        if (m := _DOT.match(raw)):
            op = _parse_dot(no, m.group(1), m.group(2), m.group(3))
            if op:
                current.ops.append(op)
        elif (m := _STORE.match(raw)):
            dims = _dims(m.group(1).split(" : ", 1)[-1])
            if dims:
                current.stored_elements += math.prod(dims[0])
        if line.endswith("{"):
            kind = _OPEN_KIND.search(line)
            region = _Region(kind.group(1) if kind else "other", no, line[:120], current)
            warps = _PART_WARPS.search(line)
            region.warps = int(warps.group(1)) if warps else None
            current.children.append(region)
            stack.append(region)
    return root


def _walk(region: _Region):
    yield region
    for child in region.children:
        yield from _walk(child)


def _loop_of(region: _Region) -> _Region | None:
    """The innermost scf.for enclosing or being `region`."""
    for node in (region, *region.ancestors()):
        if node.kind == "scf.for":
            return node
    return None


def _chains(ops: list[MatrixOp]) -> list[list[MatrixOp]]:
    by_result = {op.result: op for op in ops}
    chain_of: dict[str, int] = {}
    chains: list[list[MatrixOp]] = []
    for op in ops:
        root = op.acc if op.acc in by_result else None
        if root is not None and root in chain_of:
            idx = chain_of[root]
        else:
            idx = len(chains)
            chains.append([])
        chains[idx].append(op)
        chain_of[op.result] = idx
    return chains


def matrix_work(ttgir: str) -> MatrixWork:
    """What one CTA's K loop issues, per iteration and per tile (see the module docstring)."""
    root = _regions(ttgir)
    regions = list(_walk(root))
    loops: dict[int, list[MatrixOp]] = {}
    loop_regions: dict[int, _Region] = {}
    for region in regions:
        loop = _loop_of(region)
        if loop is not None and region.ops:
            loops.setdefault(loop.line, []).extend(region.ops)
            loop_regions[loop.line] = loop
    module_warps = root.warps or 4
    partitions = [r for r in regions if r.kind.startswith("partition")]
    total_warps = module_warps + sum(p.warps or 0 for p in partitions)
    if not loops:
        return MatrixWork(None, 0, 0, 0, 0, 0, 0, 0.0, 1, None, False, bool(partitions), module_warps, total_warps)
    # Innermost: a loop none of whose descendant loops holds matrix ops; then the one with the most ops.
    innermost = [line for line, region in loop_regions.items()
                 if not any(region in other.ancestors() for other in loop_regions.values())]
    k_line = max(innermost, key=lambda line: len(loops[line]))
    k_loop = loop_regions[k_line]
    ops = loops[k_line]
    chains = _chains(ops)
    seen_pairs: set[tuple[str, str]] = set()
    distinct = 0
    for chain in chains:
        pairs = {(op.a, op.b) for op in chain}
        if not pairs <= seen_pairs:
            distinct += chain[-1].m * chain[-1].n
        seen_pairs |= pairs
    outer = _loop_of(k_loop.parent) if k_loop.parent else None
    tile_region = outer or next((r for r in k_loop.ancestors() if r.kind in ("tt.func", "default")
                                 or r.kind.startswith("partition")), root)
    stored = sum(r.stored_elements for r in _walk(tile_region) if r is not k_loop and k_loop not in r.ancestors())
    role = next((r for r in k_loop.ancestors() if r.kind == "default" or r.kind.startswith("partition")), None)
    consumer_warps = (role.warps or module_warps) if role is not None and role.kind != "default" else module_warps
    return MatrixWork(
        k_loop_line=k_line, ops_per_iteration=len(ops), flops_per_iteration=sum(op.flops for op in ops),
        k_per_iteration=max(sum(op.k for op in chain) for chain in chains), chains=len(chains),
        accumulated_area=sum(chain[-1].m * chain[-1].n for chain in chains), distinct_area=distinct,
        operand_bytes_per_iteration=sum({op.a: op.a_bytes for op in ops}.values())
        + sum({op.b: op.b_bytes for op in ops}.values()),
        ring_depth=max([int(d) for d, elem in _RING.findall(ttgir) if elem != "i64"] or [1]),
        stored_elements=stored or None, persistent=outer is not None, warp_specialized=bool(partitions),
        consumer_warps=consumer_warps, total_warps=total_warps)
