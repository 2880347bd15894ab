"""docs/code-map.md lists every module of agent/ and evaluator/, and names no module that does not exist."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CODE_MAP = ROOT / "docs" / "code-map.md"
# Packages the map covers as a whole (one row for the folder); their modules need not be named one by one.
FOLDER_ROWS = ("evaluator/targets/",)


def _modules() -> list[str]:
    found = []
    for package in ("agent", "evaluator"):
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if path.name == "__init__.py" or rel.startswith(FOLDER_ROWS):
                continue
            found.append(rel)
    return found


def _named(text: str, module: str) -> bool:
    """A module is named by its path, or by its file name inside the row of its folder (`agent/executors/`)."""
    if f"`{module}`" in text:
        return True
    folder, name = module.rsplit("/", 1)
    return any(f"`{name}`" in row for row in text.splitlines() if f"`{folder}/`" in row)


def test_every_module_is_on_the_map():
    text = CODE_MAP.read_text()
    missing = [module for module in _modules() if not _named(text, module)]
    assert not missing, f"docs/code-map.md does not list: {missing}"


def test_the_map_names_only_paths_that_exist():
    text = CODE_MAP.read_text()
    paths = set(re.findall(r"`((?:agent|evaluator)/[\w/]*(?:\.py|/))`", text))
    assert len(paths) > 40
    gone = sorted(p for p in paths if not (ROOT / p).exists())
    assert not gone, f"docs/code-map.md names paths that do not exist: {gone}"
