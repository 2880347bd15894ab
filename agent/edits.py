"""Edit formats: how an LLM reply turns into a new kernel source.

Each format is one small class with the same interface: `detects(reply)` says whether the reply is written
in that format, `apply(reply, source)` returns the new source or raises `EditError` with a message precise
enough to send back to the model (which block, which lines, what to do instead). `apply_reply` tries the
formats in order; prose around the edit is kept as the rationale.

A SEARCH/REPLACE block is located in widening circles, as aider's edit-block applier does: the exact text,
then the same lines with trailing whitespace and a uniform indentation shift ignored (the replacement is
re-indented to match), then the same without stray blank lines at either end, then, for a block that skips
unchanged lines with `...` lines in both parts, piece by piece. A block whose REPLACE text is
already in the kernel (and whose SEARCH text is not) is reported as already applied. A block that matches
nowhere is answered with the kernel lines it most resembles ("did you mean"). A unified diff is applied hunk
by hunk through the same matcher. A fenced block counts as a whole new file only when it parses and keeps
the kernel contract; a snippet in a fence is refused with a message saying how to send a partial edit.
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from difflib import SequenceMatcher

from evaluator.contract import assignment

SEARCH, DIVIDER, REPLACE = "<<<<<<< SEARCH", "=======", ">>>>>>> REPLACE"
_FENCE = re.compile(r"^```[ \t]*([\w+-]*)[ \t]*$")
_HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+\d+(?:,\d+)? @@")
PYTHON_FENCES = ("python", "py", "python3", "")
# Declarations a whole-file reply must keep (the kernel contract, docs/kernel-contract.md); the first two
# must keep their values.
CONTRACT_NAMES = ("TARGET", "DTYPE", "SHAPES", "KNOBS")
FIXED_NAMES = ("TARGET", "DTYPE")
HINT_CONTEXT = 2
ELISION = "..."          # a SEARCH/REPLACE line standing for unchanged lines kept out of the block


class EditError(ValueError):
    """A reply that cannot be applied; the message is written for the model that produced it."""


@dataclass(frozen=True)
class Edit:
    source: str
    format: str
    rationale: str
    notes: tuple[str, ...] = field(default=())   # e.g. "block 2 was already applied"


class AlreadyApplied(EditError):
    """Every change the reply asks for is already in the kernel."""


# -- locating a block of lines -------------------------------------------------------------------------------


def _indent(line: str) -> str:
    return line[:len(line) - len(line.lstrip())]


def _trim_blank(lines: list[str]) -> list[str]:
    start, end = 0, len(lines)
    while start < end and not lines[start].strip():
        start += 1
    while end > start and not lines[end - 1].strip():
        end -= 1
    return lines[start:end]


def _shifted_match(window: list[str], search: list[str]) -> tuple[str, str] | None:
    """(indent to remove, indent to add) when `window` equals `search` up to trailing whitespace and one
    uniform indentation shift; None otherwise."""
    if len(window) != len(search):
        return None
    shift = None
    for have, want in zip(window, search):
        if have.strip() != want.strip():
            return None
        if not want.strip():
            continue
        pair = (_indent(want), _indent(have))
        common = len(_common_prefix(*pair))
        pair = (pair[0][common:], pair[1][common:])
        if shift is None:
            shift = pair
        elif pair != shift:
            return None
    return shift or ("", "")


def _common_prefix(a: str, b: str) -> str:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return a[:n]


def _reindent(lines: list[str], shift: tuple[str, str]) -> list[str]:
    remove, add = shift
    out = []
    for line in lines:
        if line.strip() and line.startswith(remove):
            line = add + line[len(remove):]
        elif line.strip():
            line = add + line
        out.append(line)
    return out


def _find_lines(source_lines: list[str], search_lines: list[str]) -> list[tuple[int, tuple[str, str]]]:
    """Where `search_lines` occur in `source_lines`, tolerating whitespace: [(start, shift)]."""
    n = len(search_lines)
    hits = []
    for start in range(len(source_lines) - n + 1):
        shift = _shifted_match(source_lines[start:start + n], search_lines)
        if shift is not None:
            hits.append((start, shift))
    return hits


def replace_once(source: str, search: str, replace: str, what: str) -> tuple[str, str | None]:
    """Replace the one occurrence of `search` in `source`, matching in widening circles.

    Returns (new source, note), the note saying when the change was already there; raises EditError naming
    `what` (e.g. "block 2") and the closest kernel lines when there is no single match.
    """
    if not search.strip():
        raise EditError(f"{what}: the SEARCH part is empty; to rewrite the whole file, send the complete file "
                        "in one ```python block instead")
    count = source.count(search)
    if count == 1:
        return source.replace(search, replace, 1), None
    if count > 1:
        raise EditError(f"{what}: the SEARCH part matches {count} places; add surrounding lines so it matches "
                        "exactly one")
    source_lines = source.splitlines(keepends=True)
    search_lines, replace_lines = search.splitlines(keepends=True), replace.splitlines(keepends=True)
    for trial_search, trial_replace in ((search_lines, replace_lines),
                                        (_trim_blank(search_lines), _trim_blank(replace_lines))):
        if not trial_search:
            continue
        hits = _find_lines(source_lines, [ln.rstrip() + "\n" for ln in trial_search])
        if len(hits) > 1:
            raise EditError(f"{what}: the SEARCH part matches {len(hits)} places (ignoring indentation); add "
                            "surrounding lines so it matches exactly one")
        if len(hits) == 1:
            start, shift = hits[0]
            new_lines = _reindent([ln.rstrip() + "\n" for ln in trial_replace], shift)
            return "".join(source_lines[:start] + new_lines + source_lines[start + len(trial_search):]), None
    elided = _elided_pieces(search_lines, replace_lines, what)
    if elided:
        result = source
        for n, (piece_search, piece_replace) in enumerate(elided, start=1):
            result, _ = replace_once(result, piece_search, piece_replace, f"{what} (part {n} between '...' lines)")
        return result, None
    if replace.strip() and (replace in source or _find_lines(source_lines, _normalized(_trim_blank(replace_lines)))):
        return source, f"{what} was already applied (its REPLACE text is in the kernel)"
    raise EditError(f"{what}: the SEARCH part does not match the current kernel. {did_you_mean(search, source)}")


def _elided_pieces(search_lines: list[str], replace_lines: list[str], what: str) -> list[tuple[str, str]]:
    """A block that skips unchanged lines with `...` lines, as (search, replace) pieces; [] when it has none."""
    def split(lines: list[str]) -> list[str]:
        pieces, current = [], []
        for line in lines:
            if line.strip() == ELISION:
                pieces.append("".join(current))
                current = []
            else:
                current.append(line)
        return [*pieces, "".join(current)]

    search_pieces, replace_pieces = split(search_lines), split(replace_lines)
    if len(search_pieces) == 1:
        return []
    if len(search_pieces) != len(replace_pieces):
        raise EditError(f"{what}: SEARCH has {len(search_pieces) - 1} '{ELISION}' line(s) and REPLACE "
                        f"{len(replace_pieces) - 1}; they must correspond, one for one")
    return [(a, b) for a, b in zip(search_pieces, replace_pieces) if a.strip() or b.strip()]


def _normalized(lines: list[str]) -> list[str]:
    return [ln.rstrip() + "\n" for ln in lines]


def did_you_mean(search: str, source: str) -> str:
    """The kernel lines most like `search`, numbered, for the model to copy exactly."""
    wanted = [ln.strip() for ln in search.splitlines() if ln.strip()]
    lines = source.splitlines()
    if not wanted or not lines:
        return "Copy the lines exactly from the current kernel."
    first = wanted[0]
    scored = [(SequenceMatcher(None, first, ln.strip()).ratio(), n) for n, ln in enumerate(lines, 1)]
    best_ratio, best_line = max(scored)
    span = max(len(search.splitlines()), 1)
    window_ratio, window_start = max(
        (SequenceMatcher(None, "\n".join(wanted), "\n".join(ln.strip() for ln in lines[i:i + span])).ratio(), i + 1)
        for i in range(max(1, len(lines) - span + 1)))
    if max(best_ratio, window_ratio) < 0.5:
        return f"No kernel lines resemble it (its first line is {first!r}); copy the lines exactly."
    start = window_start if window_ratio >= best_ratio else best_line
    lo, hi = max(1, start - HINT_CONTEXT), min(len(lines), start + span - 1 + HINT_CONTEXT)
    shown = "\n".join(f"{n:4d}| {lines[n - 1]}" for n in range(lo, hi + 1))
    return (f"Its first line {first!r} is closest to kernel line {best_line}: {lines[best_line - 1].strip()!r}. "
            f"Did you mean these lines (kernel lines {lo}-{hi})?\n{shown}\n"
            "Copy the SEARCH lines exactly from the kernel, including indentation.")


# -- formats -------------------------------------------------------------------------------------------------


class SearchReplace:
    """Blocks of `<<<<<<< SEARCH` / `=======` / `>>>>>>> REPLACE`; each SEARCH must match exactly once."""

    name = "search-replace"
    instructions = (
        "To change parts of the kernel, reply with one or more blocks of this exact form:\n\n"
        f"{SEARCH}\n<lines copied exactly from the current kernel>\n{DIVIDER}\n<the new lines>\n{REPLACE}\n\n"
        "Each SEARCH part must match the current kernel (copy it, indentation included) and only once; "
        "include enough surrounding lines to make it unique.")

    def detects(self, reply: str) -> bool:
        return any(line.strip() in (SEARCH, REPLACE) for line in reply.splitlines())

    def blocks(self, reply: str) -> list[tuple[str, str]]:
        lines = reply.splitlines(keepends=True)
        blocks, i = [], 0
        while i < len(lines):
            if lines[i].strip() != SEARCH:
                if lines[i].strip() == REPLACE:
                    raise EditError(f"reply line {i + 1}: '{REPLACE}' without an opening '{SEARCH}'")
                i += 1
                continue
            start = i
            divider = _find(lines, i + 1, DIVIDER, stop=SEARCH)
            if divider is None:
                raise EditError(f"block {len(blocks) + 1} (reply line {start + 1}): '{SEARCH}' has no '{DIVIDER}'")
            end = _find(lines, divider + 1, REPLACE, stop=SEARCH)
            if end is None:
                raise EditError(f"block {len(blocks) + 1} (reply line {start + 1}): no '{REPLACE}' after "
                                f"'{DIVIDER}' on reply line {divider + 1}")
            blocks.append(("".join(lines[start + 1:divider]), "".join(lines[divider + 1:end])))
            i = end + 1
        if not blocks:
            raise EditError(f"no complete '{SEARCH}' ... '{REPLACE}' block found")
        return blocks

    def apply(self, reply: str, source: str) -> tuple[str, list[str]]:
        result, notes = source, []
        for n, (search, replace) in enumerate(self.blocks(reply), start=1):
            result, note = replace_once(result, search, replace, f"block {n}")
            if note:
                notes.append(note)
        return result, notes


class UnifiedDiff:
    """A unified diff (`--- a/kernel.py`, `+++ b/kernel.py`, `@@` hunks); line numbers are not trusted, each
    hunk's context and removed lines are located like a SEARCH part."""

    name = "unified-diff"
    instructions = ("Or send a unified diff of kernel.py (```diff fence, `@@` hunks with a few context lines); "
                    "the hunks' context lines must match the current kernel.")

    def detects(self, reply: str) -> bool:
        return any(_HUNK.match(line) for line in reply.splitlines())

    def hunks(self, reply: str) -> list[tuple[str, str]]:
        hunks, before, after, inside = [], [], [], False
        for line in reply.splitlines(keepends=True):
            if _HUNK.match(line) or line.startswith(("```", "--- ", "+++ ")):
                if inside and (before or after):
                    hunks.append(("".join(before), "".join(after)))
                before, after, inside = [], [], bool(_HUNK.match(line))
                continue
            if not inside:
                continue
            body = line[1:] if line[:1] in (" ", "-", "+") else line
            if line.startswith("\\"):
                continue
            if line[:1] == "-":
                before.append(body)
            elif line[:1] == "+":
                after.append(body)
            elif line[:1] == " " or not line.strip():
                before.append(body if line.strip() else "\n")
                after.append(body if line.strip() else "\n")
            else:
                if before or after:
                    hunks.append(("".join(before), "".join(after)))
                before, after, inside = [], [], False
        if inside and (before or after):
            hunks.append(("".join(before), "".join(after)))
        if not hunks:
            raise EditError("the diff has no hunks with lines to change")
        return hunks

    def apply(self, reply: str, source: str) -> tuple[str, list[str]]:
        result, notes = source, []
        for n, (before, after) in enumerate(self.hunks(reply), start=1):
            if not before.strip():
                raise EditError(f"hunk {n}: it has no context or removed lines to locate it; include a few "
                                "unchanged lines around the change")
            result, note = replace_once(result, before, after, f"hunk {n}")
            if note:
                notes.append(note)
        return result, notes


class WholeFile:
    """Exactly one fenced ```python (or ```py, ```python3) block holding the complete new kernel file."""

    name = "whole-file"
    instructions = ("To rewrite the kernel, reply with the complete new file in exactly one ```python fenced "
                    "block (every line, not just the changed ones; keep its TARGET, DTYPE, SHAPES, KNOBS and "
                    "launch()).")

    def detects(self, reply: str) -> bool:
        return bool(_fenced_blocks(reply))

    def apply(self, reply: str, source: str) -> tuple[str, list[str]]:
        fenced = _fenced_blocks(reply)
        blocks = [body for lang, body in fenced if lang in PYTHON_FENCES]
        if not blocks:
            langs = ", ".join(sorted({f"```{lang}" for lang, _ in fenced}))
            raise EditError(f"found fenced blocks ({langs}) but none marked ```python")
        if len(blocks) > 1:
            raise EditError(f"found {len(blocks)} ```python blocks; send the whole kernel in exactly one, "
                            "or use SEARCH/REPLACE blocks")
        problem = contract_problem(blocks[0], source)
        if problem:
            raise EditError(f"the ```python block is not a whole kernel file: {problem}. To change part of the "
                            "kernel, use SEARCH/REPLACE blocks; to replace it, send every line of the new file")
        return blocks[0], []


FORMATS = (SearchReplace(), UnifiedDiff(), WholeFile())


def contract_problem(candidate: str, incumbent: str) -> str | None:
    """Why `candidate` is not a complete kernel file keeping the incumbent's contract, or None."""
    try:
        tree = ast.parse(candidate)
    except SyntaxError as exc:
        return f"it does not parse (line {exc.lineno}: {exc.msg})"
    missing = [name for name in CONTRACT_NAMES if assignment(tree, name) is None]
    if not any(isinstance(node, ast.FunctionDef) and node.name == "launch" for node in tree.body):
        missing.append("def launch(a, b, c, **knobs)")
    if missing:
        return f"it lacks {', '.join(missing)}"
    old_tree = ast.parse(incumbent)
    for name in FIXED_NAMES:
        new, old = _literal(tree, name), _literal(old_tree, name)
        if old is not None and new != old:
            return f"it changes {name} from {old!r} to {new!r}, which the run fixes"
    return None


def _literal(tree: ast.Module, name: str):
    node = assignment(tree, name)
    try:
        return ast.literal_eval(node.value) if node is not None and node.value is not None else None
    except ValueError:
        return None


def format_instructions() -> str:
    return "\n\n".join(f"- {fmt.name}: {fmt.instructions}" for fmt in FORMATS)


def apply_reply(reply: str, source: str) -> Edit:
    """Turn a model's reply into a new kernel source, or raise `EditError` saying precisely why not."""
    if not reply or not reply.strip():
        raise EditError("the reply is empty")
    for fmt in FORMATS:
        if fmt.detects(reply):
            new_source, notes = fmt.apply(reply, source)
            break
    else:
        raise EditError(f"no edit found: the reply has neither '{SEARCH}' ... '{REPLACE}' blocks, nor a unified "
                        "diff, nor a ```python block with the whole file")
    if not new_source.endswith("\n"):
        new_source += "\n"
    if new_source == source and notes:
        raise AlreadyApplied(f"already applied: {'; '.join(notes)}. The kernel already has this change; "
                             "propose a different one")
    if new_source == source:
        raise EditError("the edit leaves the kernel unchanged")
    try:
        compile(new_source, "kernel.py", "exec")
    except SyntaxError as exc:
        raise EditError(f"the edited kernel is not valid Python: line {exc.lineno}: {exc.msg}") from None
    return Edit(source=new_source, format=fmt.name, rationale=rationale_of(reply), notes=tuple(notes))


def rationale_of(reply: str, limit: int = 1500) -> str:
    """The prose of a reply: everything outside fences, diffs and edit blocks."""
    kept, skipping, in_hunk = [], None, False
    for line in reply.splitlines():
        stripped = line.strip()
        if in_hunk and line[:1] in (" ", "+", "-", "\\"):
            continue
        in_hunk = bool(_HUNK.match(line))
        if skipping is None and stripped == SEARCH:
            skipping = REPLACE
        elif skipping is None and _FENCE.match(stripped):
            skipping = "```"
        elif skipping is not None and (stripped == skipping or (skipping == "```" and stripped.startswith("```"))):
            skipping = None
        elif skipping is None and not (in_hunk or line.startswith(("--- ", "+++ "))):
            kept.append(line)
    return "\n".join(kept).strip()[:limit]


def _find(lines: list[str], start: int, marker: str, stop: str) -> int | None:
    for j in range(start, len(lines)):
        if lines[j].strip() == marker:
            return j
        if lines[j].strip() == stop:
            return None
    return None


def _fenced_blocks(reply: str) -> list[tuple[str, str]]:
    blocks, lang, body = [], None, []
    for line in reply.splitlines(keepends=True):
        match = _FENCE.match(line.strip())
        if lang is None and match:
            lang, body = match.group(1).lower(), []
        elif lang is not None and line.strip() == "```":
            blocks.append((lang, "".join(body)))
            lang = None
        elif lang is not None:
            body.append(line)
    return blocks
