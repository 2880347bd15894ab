"""Errors the evaluator reports to users, each with the exit code the CLI uses for it."""
from __future__ import annotations

EXIT_OK = 0
EXIT_CANDIDATE = 1      # the candidate failed: contract, import, compile, correctness, policy
EXIT_USAGE = 2          # the user asked for something impossible or malformed
EXIT_NO_DEVICE = 3      # a runtime evaluation was requested without a GPU of the kernel's target


class NearpeakError(Exception):
    """Base class: a message meant for a human, plus a machine-readable status."""

    status = "error"
    exit_code = EXIT_CANDIDATE

    def __init__(self, message: str, *, file: str | None = None, line: int | None = None):
        super().__init__(message)
        self.message = message
        self.file = file
        self.line = line

    def where(self) -> str:
        if self.file and self.line:
            return f"{self.file}:{self.line}"
        return self.file or ""

    def __str__(self) -> str:
        where = self.where()
        return f"{where}: {self.message}" if where else self.message

    def to_dict(self) -> dict:
        return {"status": self.status, "message": self.message, "file": self.file, "line": self.line}


class UsageError(NearpeakError):
    status = "usage_error"
    exit_code = EXIT_USAGE


class CandidateNotFound(NearpeakError):
    status = "not_found"
    exit_code = EXIT_USAGE


class ContractError(NearpeakError):
    status = "contract_error"


class CallError(NearpeakError):
    """The entry function named on the command line does not exist or cannot take the given arguments."""

    status = "call_error"
    exit_code = EXIT_USAGE


class EntryFailure(NearpeakError):
    """The host code (a foreign file's entry, or launch) raised an exception of its own, not the compiler."""

    status = "entry_error"


class ImportFailure(NearpeakError):
    status = "import_error"


class CompileFailure(NearpeakError):
    status = "compile_error"


class ShapeUnsupported(NearpeakError):
    """The kernel's SHAPE_MULTIPLE cannot run a shape the caller's problem requires."""
    status = "unsupported_shape"


class NoDeviceError(NearpeakError):
    status = "no_device"
    exit_code = EXIT_NO_DEVICE
