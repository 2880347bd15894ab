"""Which GPU is here, which nearpeak target it is, and whether it is still healthy.

The runtime path is the same for CUDA and ROCm builds of PyTorch (ROCm PyTorch answers through
`torch.cuda` too); only the way the architecture is named differs: a CUDA device reports a compute
capability, a ROCm device a `gcnArchName` such as "gfx950:sramecc+:xnack-". Driver and clock figures come
from the SMI tool of the target's family (its toolchain's `smi_query` and `parse_smi`: nvidia-smi, or
rocm-smi, not yet run on hardware) when it answers, and are left out (None) when it does not: they are
context for a reader, never inputs to a verdict.
"""
from __future__ import annotations

import shutil
import subprocess
from dataclasses import asdict, dataclass, field

from ..errors import NoDeviceError
from ..targets import SmiReading, get_target, target_for_device


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


def _run_tool(argv: list[str], timeout_s: float = 10.0) -> str | None:
    if shutil.which(argv[0]) is None:
        return None
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def read_driver_and_clocks(target: str | None, index: int) -> SmiReading:
    """Ask the SMI tool of `target`'s family (its toolchain's `smi_query`) about GPU `index`; (None, {}) for a
    GPU of no target, or when the tool is missing or refuses."""
    if target is None:
        return SmiReading(None, {})
    toolchain = get_target(target).toolchain
    out = _run_tool(toolchain.smi_query(index))
    return toolchain.parse_smi(out, index) if out else SmiReading(None, {})


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
    driver, clocks = read_driver_and_clocks(target, index) if with_smi else SmiReading(None, {})
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
