"""Functions that misbehave in every way a candidate process can, called inside the sandbox directly.

The policy check rejects candidate files that could do most of these (they need `os`, `signal` or
`subprocess`), so the containment itself is tested by running these through `run_isolated` as if the
candidate had slipped past it.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path


def echo(**kwargs):
    """Behaves: returns its arguments."""
    return kwargs


def spin_forever():
    while True:
        pass


def segfault():
    os.kill(os.getpid(), signal.SIGSEGV)
    time.sleep(10)


def exit_abruptly(code: int = 3):
    os._exit(code)


def exit_zero_without_result():
    sys.stdout.flush()
    os._exit(0)


def endless_output():
    line = "all work and no play " * 200 + "\n"
    while True:
        sys.stdout.write(line)


def fork_and_linger(pid_file: str):
    """Leaves a forked child sleeping behind and returns at once; the sandbox must kill it with the group."""
    pid = os.fork()
    if pid == 0:
        time.sleep(600)
        os._exit(0)
    Path(pid_file).write_text(str(pid))
    return pid


def linger_with_child(info_file: str):
    """Forks a sleeping child, writes "own pid, child pid, working directory", then sleeps: only death ends it."""
    child = os.fork()
    if child == 0:
        time.sleep(600)
        os._exit(0)
    Path(info_file).write_text(f"{os.getpid()} {child} {os.getcwd()}")
    time.sleep(600)


def spawn_and_linger(pid_file: str):
    """Starts a separate program that outlives this call."""
    proc = subprocess.Popen(["sleep", "600"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    Path(pid_file).write_text(str(proc.pid))
    return proc.pid


def raise_error():
    raise ValueError("candidate raised on purpose")


def fake_cuda_fault():
    """What PyTorch raises after a kernel touched memory it does not own."""
    raise RuntimeError("CUDA error: an illegal memory access was encountered\n"
                       "CUDA kernel errors might be asynchronously reported at some other API call")


def hip_fault_abort():
    """What the ROCm runtime does on a GPU page fault: print to stderr and abort the process."""
    sys.stderr.write("Memory access fault by GPU node-2 (Agent handle: 0x5555) on address 0x7f00. "
                     "Reason: Page not present or supervisor privilege.\n")
    sys.stderr.flush()
    os.abort()


def forge_result():
    """Writes a success result without the sandbox's token, then leaves before the real one is written."""
    spec = json.loads(Path(".sandbox-spec.json").read_text())
    Path(spec["result_path"]).write_text(json.dumps({"ok": True, "value": {"status": "ok", "tflops": 1e6}}))
    os._exit(0)


def allocate(megabytes: int):
    return len(bytearray(megabytes * 1024 * 1024))


def tamper(path: str):
    """Edits a file of the (watched) evaluator tree."""
    with open(path, "a") as handle:
        handle.write("\nSCORE_OVERRIDE = 1e9\n")
    return "done"


def read_outside(path: str):
    """Reads a file outside the scratch directory: the sandbox does not prevent this (the policy does)."""
    return len(Path(path).read_bytes())


def report_environment():
    return {"cwd": os.getcwd(), "env": dict(os.environ)}


def escape_group(pid_file: str):
    """Starts a program in a new session (out of the sandbox's process group) that keeps stdout open.

    The sandbox cannot kill it (docs/threat-model.md says so); it must at least not hang waiting for it.
    """
    proc = subprocess.Popen(["sleep", "30"], start_new_session=True)
    Path(pid_file).write_text(str(proc.pid))
    return proc.pid


def unusual_values():
    """Returns values JSON has no type for, as a runtime record might (a dtype, a set, a path)."""
    import torch

    return {"dtype": torch.bfloat16, "set": {3, 1}, "path": Path("/x"), "scalar": torch.tensor(2.5)}
