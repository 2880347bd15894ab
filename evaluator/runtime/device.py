"""Which GPU is here, which nearpeak target it is, and whether it is still healthy.

The runtime path is the same for CUDA and ROCm builds of PyTorch (ROCm PyTorch answers through
`torch.cuda` too); only the way the architecture is named differs: a CUDA device reports a compute
capability, a ROCm device a `gcnArchName` such as "gfx950:sramecc+:xnack-". Driver and clock figures come
from `nvidia-smi` / `rocm-smi` when those tools answer, and are left out (None) when they do not: they are
context for a reader, never inputs to a verdict.
"""
from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import asdict, dataclass, field

from ..errors import NoDeviceError
from ..targets import target_for_device


@dataclass(frozen=True)
class DeviceInfo:
    """What the runtime record says about the GPU a measurement ran on."""

    target: str | None             # nearpeak target name, None for a GPU nearpeak has no target for
    name: str
    arch: str                      # "9.0" (CUDA capability) or "gfx950" (ROCm gcnArchName, features dropped)
    backend: str                   # "cuda" or "hip"
    index: int
    multiprocessors: int
    memory_bytes: int
    l2_bytes: int | None
    driver: str | None = None
    clocks_mhz: dict[str, float] = field(default_factory=dict)  # sm/mem now and max, as the SMI tool read them

    def to_dict(self) -> dict:
        return asdict(self)


def target_for_capability(capability: tuple[int, int]) -> str | None:
    """nearpeak target of a CUDA compute capability: (9, 0) -> "sm90"."""
    target = target_for_device("cuda", f"{capability[0]}.{capability[1]}")
    return target.name if target else None


def target_for_gcn_arch(gcn_arch_name: str) -> str | None:
    """nearpeak target of a ROCm gcnArchName: "gfx950:sramecc+:xnack-" -> "gfx950"."""
    target = target_for_device("hip", gcn_arch_name)
    return target.name if target else None


NVIDIA_SMI_FIELDS = ("driver_version", "clocks.sm", "clocks.mem", "clocks.max.sm", "clocks.max.mem")


def parse_nvidia_smi(csv_line: str) -> tuple[str | None, dict[str, float]]:
    """Driver and clocks from one line of `nvidia-smi --query-gpu=QUERY_FIELDS --format=csv,noheader,nounits`."""
    parts = [p.strip() for p in csv_line.strip().split(",")]
    if len(parts) != len(NVIDIA_SMI_FIELDS):
        return None, {}
    driver = parts[0] or None
    clocks: dict[str, float] = {}
    for key, raw in zip(("sm", "mem", "max_sm", "max_mem"), parts[1:]):
        try:
            clocks[key] = float(raw)
        except ValueError:
            continue  # "[N/A]" or "[Not Supported]"
    return driver, clocks


def _number_mhz(text: str) -> float | None:
    digits = "".join(ch for ch in str(text) if ch.isdigit() or ch == ".")
    try:
        return float(digits)
    except ValueError:
        return None


def parse_rocm_smi(text: str, index: int = 0) -> tuple[str | None, dict[str, float]]:
    """Driver and clocks from `rocm-smi --showdriverversion --showclocks --json` (card keys "card0", ...)."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        return None, {}
    driver = None
    system = data.get("system", {})
    for key, value in system.items():
        if "driver" in key.lower():
            driver = str(value)
    card = data.get(f"card{index}", {})
    clocks: dict[str, float] = {}
    for key, value in card.items():
        text = str(value)
        if "mhz" not in text.lower():  # skip "clock level" entries, which hold a level index
            continue
        name = "sm" if "sclk" in key.lower() else "mem" if "mclk" in key.lower() else None
        mhz = _number_mhz(text.split("(")[-1])
        if name and name not in clocks and mhz is not None:
            clocks[name] = mhz
    return driver, clocks


def _run_tool(argv: list[str], timeout_s: float = 10.0) -> str | None:
    if shutil.which(argv[0]) is None:
        return None
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def read_driver_and_clocks(backend: str, index: int) -> tuple[str | None, dict[str, float]]:
    """Ask the vendor's SMI tool; (None, {}) when it is missing or refuses."""
    if backend == "cuda":
        out = _run_tool(["nvidia-smi", f"--id={index}", f"--query-gpu={','.join(NVIDIA_SMI_FIELDS)}",
                         "--format=csv,noheader,nounits"])
        return parse_nvidia_smi(out.splitlines()[0]) if out else (None, {})
    out = _run_tool(["rocm-smi", "--showdriverversion", "--showclocks", "--json"])
    return parse_rocm_smi(out, index) if out else (None, {})


def detect(index: int = 0, with_smi: bool = True) -> DeviceInfo | None:
    """Describe GPU `index`, or None when PyTorch sees no GPU."""
    import torch

    if not torch.cuda.is_available() or torch.cuda.device_count() <= index:
        return None
    props = torch.cuda.get_device_properties(index)
    if torch.version.hip:
        backend = "hip"
        arch = str(getattr(props, "gcnArchName", "")).split(":")[0]
        target = target_for_gcn_arch(arch)
    else:
        backend = "cuda"
        capability = (props.major, props.minor)
        arch = f"{props.major}.{props.minor}"
        target = target_for_capability(capability)
    driver, clocks = read_driver_and_clocks(backend, index) if with_smi else (None, {})
    l2 = getattr(props, "L2_cache_size", None)
    return DeviceInfo(target=target, name=props.name, arch=arch, backend=backend, index=index,
                      multiprocessors=props.multi_processor_count, memory_bytes=props.total_memory,
                      l2_bytes=int(l2) if l2 else None, driver=driver, clocks_mhz=clocks)


def detect_target(index: int = 0) -> str | None:
    """The nearpeak target of GPU `index` ("sm90", "gfx950"), or None (no GPU, or one without a target)."""
    info = detect(index, with_smi=False)
    return info.target if info else None


def require_device(target: str, index: int = 0, with_smi: bool = True) -> DeviceInfo:
    """The GPU for `target`, or NoDeviceError saying what is (not) here; `with_smi=False` skips the SMI tool's
    driver and clock reading when only the presence of the device matters."""
    info = detect(index, with_smi=with_smi)
    if info is None:
        raise NoDeviceError(f"no GPU is visible to PyTorch; a runtime evaluation for {target} needs one")
    if info.target != target:
        raise NoDeviceError(f"the GPU here is {info.name} ({info.arch}), not a {target} device")
    return info


def synchronize(device) -> None:
    """Wait for all work on every stream of `device` (no-op on the CPU); raises on an asynchronous fault."""
    import torch

    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


def health_check(device="cuda") -> dict:
    """A tiny known computation after a candidate: the GPU still answers, and answers right.

    After an illegal memory access the CUDA context is gone and every call raises; a GPU that answers a
    4x4 product wrongly is just as unfit for the next candidate.
    """
    import torch

    try:
        x = torch.arange(16, dtype=torch.float32, device=device).reshape(4, 4)
        got = (x @ x).sum().item()
        synchronize(device)
    except RuntimeError as exc:  # the CUDA/HIP runtime reports a dead context as RuntimeError
        return {"healthy": False, "message": str(exc).splitlines()[0] if str(exc) else type(exc).__name__}
    exact = torch.arange(16, dtype=torch.float64).reshape(4, 4)
    expected = float((exact @ exact).sum())
    healthy = got == expected
    return {"healthy": healthy, "message": None if healthy else f"4x4 product summed to {got}, expected {expected}"}
