"""Edit formats: how an LLM reply turns into a new kernel source.

Each format is one small class with the same interface: `detects(reply)` says whether the reply is written
in that format, `apply(reply, source)` returns the new source or raises `EditError` with a message precise
enough to send back to the model (which block, which line, what to do instead). `apply_reply` tries the
formats in order. The result is always checked to be valid Python and to differ from the input.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from difflib import SequenceMatcher

SEARCH, DIVIDER, REPLACE = "<<<<<<< SEARCH", "=======", ">>>>>>> REPLACE"
_FENCE = re.compile(r"^```[ \t]*(\w*)[ \t]*$")


class EditError(ValueError):
    """A reply that cannot be applied; the message is written for the model that produced it."""


@dataclass(frozen=True)
class Edit:
    source: str
    format: str
    rationale: str


class SearchReplace:
    """Blocks of `<<<<<<< SEARCH` / `=======` / `>>>>>>> REPLACE`; each SEARCH must match exactly once."""

    name = "search-replace"
    instructions = (
        "To change parts of the kernel, reply with one or more blocks of this exact form:\n\n"
        f"{SEARCH}\n<lines copied exactly from the current kernel>\n{DIVIDER}\n<the new lines>\n{REPLACE}\n\n"
        "Each SEARCH part must match the current kernel exactly (whitespace included) and only once; "
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

    def apply(self, reply: str, source: str) -> str:
        result = source
        for n, (search, replace) in enumerate(self.blocks(reply), start=1):
            if not search.strip():
                raise EditError(f"block {n}: the SEARCH part is empty; to rewrite the whole file, send the "
                                "complete file in one ```python block instead")
            count = result.count(search)
            if count == 0:
                raise EditError(f"block {n}: the SEARCH part does not match the current kernel. "
                                f"{_closest_hint(search, result)}")
            if count > 1:
                raise EditError(f"block {n}: the SEARCH part matches {count} places; add surrounding lines so "
                                "it matches exactly one")
            result = result.replace(search, replace, 1)
        return result


class WholeFile:
    """Exactly one fenced ```python block holding the complete new kernel file."""

    name = "whole-file"
    instructions = ("To rewrite the kernel, reply with the complete new file in exactly one ```python fenced "
                    "block (every line, not just the changed ones).")

    def detects(self, reply: str) -> bool:
        return bool(_fenced_blocks(reply))

    def apply(self, reply: str, source: str) -> str:
        blocks = [body for lang, body in _fenced_blocks(reply) if lang in ("python", "py", "")]
        if not blocks:
            raise EditError("found a fenced block but none marked ```python")
        if len(blocks) > 1:
            raise EditError(f"found {len(blocks)} ```python blocks; send the whole kernel in exactly one, "
                            "or use SEARCH/REPLACE blocks")
        return blocks[0]


FORMATS = (SearchReplace(), WholeFile())


def format_instructions() -> str:
    return "\n\n".join(f"- {fmt.name}: {fmt.instructions}" for fmt in FORMATS)


def apply_reply(reply: str, source: str) -> Edit:
    """Turn a model's reply into a new kernel source, or raise `EditError` saying precisely why not."""
    if not reply or not reply.strip():
        raise EditError("the reply is empty")
    for fmt in FORMATS:
        if fmt.detects(reply):
            new_source = fmt.apply(reply, source)
            break
    else:
        raise EditError(f"no edit found: the reply has neither '{SEARCH}' ... '{REPLACE}' blocks nor a "
                        "```python block with the whole file")
    if not new_source.endswith("\n"):
        new_source += "\n"
    try:
        compile(new_source, "kernel.py", "exec")
    except SyntaxError as exc:
        raise EditError(f"the edited kernel is not valid Python: line {exc.lineno}: {exc.msg}") from None
    if new_source == source:
        raise EditError("the edit leaves the kernel unchanged")
    return Edit(source=new_source, format=fmt.name, rationale=rationale_of(reply))


def rationale_of(reply: str, limit: int = 1500) -> str:
    """The prose of a reply: everything outside fences and edit blocks."""
    kept, skipping = [], None
    for line in reply.splitlines():
        stripped = line.strip()
        if skipping is None and stripped == SEARCH:
            skipping = REPLACE
        elif skipping is None and _FENCE.match(stripped):
            skipping = "```"
        elif skipping is not None and (stripped == skipping or (skipping == "```" and stripped.startswith("```"))):
            skipping = None
        elif skipping is None:
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


def _closest_hint(search: str, source: str) -> str:
    """Point at the kernel line closest to the first SEARCH line, so the model can copy it exactly."""
    first = next((ln for ln in search.splitlines() if ln.strip()), "")
    candidates = source.splitlines()
    if not first or not candidates:
        return "Copy the lines exactly from the current kernel."
    scored = [(SequenceMatcher(None, first.strip(), ln.strip()).ratio(), n, ln) for n, ln in enumerate(candidates, 1)]
    ratio, line_no, line = max(scored)
    if ratio < 0.5:
        return f"No kernel line resembles its first line {first.strip()!r}; copy the lines exactly."
    return (f"Its first line {first.strip()!r} is closest to kernel line {line_no}: {line.strip()!r}; "
            "copy the lines exactly, including indentation.")
