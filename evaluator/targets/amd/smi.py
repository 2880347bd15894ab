"""Driver version and clocks of an AMD GPU, read from `rocm-smi`'s JSON output. Not yet run on hardware.

`rocm-smi --showdriverversion --showclocks --json` prints one object: a "cardN" entry per GPU whose clock
entries come in pairs, "sclk clock level:" (a DPM level index) and "sclk clock speed:" ("(2100Mhz)"), and a
"system" entry holding "Driver version". sclk is the engine clock, mclk the memory clock; fclk, socclk
and the other domains are left out. Written from the tool's documented output; no AMD GPU has answered it
here yet. The reading is context for a reader, never input to a verdict.
"""
from __future__ import annotations

import json
import re

from ..base import SmiReading

CLOCK_DOMAINS = {"sclk": "sm", "mclk": "mem"}  # rocm-smi clock domain -> the name clocks_mhz uses
_SPEED_KEY = re.compile(r"^(\w+) clock speed:?$", re.IGNORECASE)
_MHZ = re.compile(r"([\d.]+)\s*mhz", re.IGNORECASE)


def smi_query(index: int) -> list[str]:
    """The command line that reads the driver version and every GPU's clocks (`parse_smi` picks `index`)."""
    return ["rocm-smi", "--showdriverversion", "--showclocks", "--json"]


def parse_smi(text: str, card: str | int) -> SmiReading:
    """Driver version and the clocks of rocm-smi's "card<card>" (the host's numbering,
    `evaluator.targets.base.smi_device_id`) from the output of `smi_query`; nothing when unreadable."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        return SmiReading(None, {})
    if not isinstance(data, dict):
        return SmiReading(None, {})
    system, card = (entry if isinstance(entry, dict) else {} for entry in (data.get("system"), data.get(f"card{card}")))
    driver = next((str(value) for key, value in system.items() if "driver" in key.lower()), None)
    clocks: dict[str, float] = {}
    for key, value in card.items():
        domain = _SPEED_KEY.match(key.strip())
        mhz = _MHZ.search(str(value))
        name = CLOCK_DOMAINS.get(domain.group(1).lower()) if domain else None
        if name and mhz:
            clocks[name] = float(mhz.group(1))
    return SmiReading(driver, clocks)
