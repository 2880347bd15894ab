"""The run ledger: one git repository per run, and the only module in nearpeak that touches git.

Layout (docs/ledger-format.md has the full description):

* `main` holds the best lineage: the starting kernel (the root commit) and the accepted steps that led to the
  best kernel of the run, in order.
* every other accepted kernel (a member of the search population, or one that has left it) is a commit on its
  own ref, `refs/population/<step>-<n>` or `refs/retired/<step>-<n>`;
* every other evaluated candidate is a commit on its own ref, `refs/attempts/<step>-<n>`;
* a candidate received from a proposer and not yet judged waits on `refs/proposals/<step>-<n>`.

Every commit's parent is the kernel it was proposed from and judged against, so the commits form the search
tree and `git log --first-parent` of any ref is that kernel's lineage.

Crash safety comes from never writing a commit through the index. Blobs, the tree and the commit object
are written first (git writes each object to a temporary file and renames it into place); the refs then
move in one `git update-ref --stdin` transaction. A process killed at any point therefore leaves either the
old refs (plus unreferenced objects, which `git fsck` reports as dangling, not as errors) or the new ones.
The work tree is only a convenience copy of `main` for people who `cd` into a run; `recover()` resets it.

Author and committer are passed to each git process explicitly; the environment of this process is never
changed.
"""
from __future__ import annotations

import fcntl
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import git

MAIN = "refs/heads/main"
ATTEMPTS = "refs/attempts/"
PROPOSALS = "refs/proposals/"   # candidates received but not yet judged (kept across a kill)
POPULATION = "refs/population/"
RETIRED = "refs/retired/"
SCRATCH = ".work"        # per-run scratch space for candidate files under evaluation; never committed
PROMPTS = "prompts"      # the manual proposer's prompt and reply files; kept, never committed
_LOCK_NAME = "nearpeak.lock"
_GIT_ERRORS = (git.GitCommandError, git.InvalidGitRepositoryError, git.NoSuchPathError, ValueError)


class LedgerError(Exception):
    """A ledger that cannot be created, opened or written, with a message meant for a human."""


@dataclass(frozen=True)
class Signature:
    """Who wrote a commit: the proposer and the harness, recorded as author and committer."""

    name: str
    email: str


HARNESS = Signature("nearpeak", "nearpeak@localhost")


@dataclass(frozen=True)
class Entry:
    """One commit of the ledger: where it lives (`ref`), its message and parsed trailers."""

    sha: str
    ref: str
    parent: str | None
    message: str
    trailers: dict[str, str] = field(default_factory=dict)

    @property
    def summary(self) -> str:
        return self.message.splitlines()[0] if self.message else ""

    @property
    def step(self) -> int:
        return int(self.trailers.get("Step", "0"))

    @property
    def candidate(self) -> int:
        return int(self.trailers.get("Candidate", "0"))

    @property
    def verdict(self) -> str:
        return self.trailers.get("Verdict", "")


def parse_trailers(message: str) -> dict[str, str]:
    """Trailers are the `Key: value` lines of a message's last paragraph."""
    paragraphs = [p for p in message.strip().split("\n\n") if p.strip()]
    if len(paragraphs) < 2:
        return {}
    trailers: dict[str, str] = {}
    for line in paragraphs[-1].splitlines():
        key, sep, value = line.partition(": ")
        if not sep or not key or " " in key:
            return {}
        trailers[key] = value.strip()
    return trailers


def attempt_ref(step: int, candidate: int) -> str:
    return f"{ATTEMPTS}{step}-{candidate}"


def proposal_ref(step: int, candidate: int) -> str:
    return f"{PROPOSALS}{step}-{candidate}"


def population_ref(step: int, candidate: int) -> str:
    return f"{POPULATION}{step}-{candidate}"


def retired_ref(step: int, candidate: int) -> str:
    return f"{RETIRED}{step}-{candidate}"


@dataclass(frozen=True)
class RefChange:
    """One ref update of a transaction: create (`old` None), move (both set) or delete (`new` None)."""

    ref: str
    new: str | None
    old: str | None


class Ledger:
    """A run repository: create it, commit steps and attempts, read them back."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        try:
            self.repo = git.Repo(self.path)
        except _GIT_ERRORS as exc:
            raise LedgerError(f"{self.path} is not a nearpeak run (no git repository): {exc}") from None
        if self.repo.working_tree_dir is None or Path(self.repo.working_tree_dir).resolve() != self.path.resolve():
            raise LedgerError(f"{self.path} is not the top of a run repository")
        self._lock_file = None

    # -- creating, locking, recovering ------------------------------------------------------------------

    @classmethod
    def create(cls, path: str | Path, files: dict[str, bytes], message: str, author: Signature = HARNESS) -> Ledger:
        """Make a new run repository whose root commit on `main` holds `files`."""
        path = Path(path)
        if path.exists() and any(path.iterdir()):
            raise LedgerError(f"{path} already exists and is not empty; pick another --run-id or --resume it")
        path.mkdir(parents=True, exist_ok=True)
        try:
            git.Repo.init(path, initial_branch="main")
        except _GIT_ERRORS as exc:
            raise LedgerError(f"cannot create a git repository at {path}: {exc}") from None
        (path / ".git" / "info").mkdir(exist_ok=True)
        (path / ".git" / "info" / "exclude").write_text(f"/{SCRATCH}/\n/{PROMPTS}/\n")
        ledger = cls(path)
        ledger.lock()
        ledger.commit(files, message, parent=None, ref=MAIN, author=author)
        return ledger

    def exclude(self, name: str) -> None:
        """Keep the file `name` at the run's top out of git (and so out of `recover()`'s clean-up), as a report
        written beside the ledger is."""
        exclude = self.path / ".git" / "info" / "exclude"
        lines = exclude.read_text().splitlines() if exclude.exists() else []
        if f"/{name}" not in lines:
            exclude.parent.mkdir(exist_ok=True)
            exclude.write_text("".join(f"{line}\n" for line in [*lines, f"/{name}"]))

    def lock(self, wait: float = 5.0) -> None:
        """Hold an exclusive lock on the run for this process's lifetime (the kernel drops it on kill -9).

        Waits up to `wait` seconds: a process killed a moment ago may still be releasing it.
        """
        handle = open(self.path / ".git" / _LOCK_NAME, "a+")  # noqa: SIM115 - held open until unlock()
        deadline = time.monotonic() + wait
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    handle.close()
                    raise LedgerError(f"run {self.path} is in use by another nearpeak process") from None
                time.sleep(0.05)
        self._lock_file = handle

    def unlock(self) -> None:
        if self._lock_file is not None:
            self._lock_file.close()
            self._lock_file = None

    def recover(self) -> list[str]:
        """Undo what a killed writer may have left: stale git lock files, a work tree that is not `main`.

        Only valid while holding the run lock (no other writer exists). Returns what was cleaned up.
        """
        if self._lock_file is None:
            raise LedgerError("recover() needs the run lock")
        cleaned = []
        git_dir = self.path / ".git"
        for stale in [git_dir / "index.lock", git_dir / "HEAD.lock", git_dir / "packed-refs.lock",
                      *(git_dir / "refs").rglob("*.lock")]:
            if stale.exists():
                stale.unlink()
                cleaned.append(str(stale.relative_to(self.path)))
        if self.repo.git.status("--porcelain"):
            cleaned.append("work tree reset to main")
        self._sync_work_tree()
        return cleaned

    def _sync_work_tree(self) -> None:
        self._git("read-tree", "--reset", "-u", "HEAD")
        self._git("clean", "-f", "-d", "-q")

    # -- writing -----------------------------------------------------------------------------------------

    def _git(self, *args: str, stdin: bytes | None = None, env: dict[str, str] | None = None) -> str:
        try:
            if stdin is None:
                return self.repo.git.execute(["git", *args], env=env)
            with tempfile.TemporaryFile() as handle:  # Popen needs a real file descriptor as stdin
                handle.write(stdin)
                handle.seek(0)
                return self.repo.git.execute(["git", *args], istream=handle, env=env)
        except git.GitCommandError as exc:
            raise LedgerError(f"git {args[0]} failed in {self.path}: {exc.stderr.strip() or exc}") from None

    def _write_tree(self, files: dict[str, bytes]) -> str:
        lines = []
        for name in sorted(files):
            if "/" in name or not name:
                raise LedgerError(f"ledger files are flat; got {name!r}")
            blob = self._git("hash-object", "-w", "--stdin", stdin=files[name])
            lines.append(f"100644 blob {blob}\t{name}")
        return self._git("mktree", stdin=("\n".join(lines) + "\n").encode())

    def write_commit(self, files: dict[str, bytes], message: str, parent: str | None,
                     author: Signature = HARNESS) -> str:
        """Write the objects of one commit holding exactly `files`; no ref moves (see `move_refs`)."""
        tree = self._write_tree(files)
        env = {"GIT_AUTHOR_NAME": author.name, "GIT_AUTHOR_EMAIL": author.email,
               "GIT_COMMITTER_NAME": HARNESS.name, "GIT_COMMITTER_EMAIL": HARNESS.email}
        args = ["commit-tree", tree] + (["-p", parent] if parent else [])
        return self._git(*args, stdin=message.encode(), env=env)

    def move_refs(self, changes: list[RefChange]) -> None:
        """Apply every change in one `update-ref` transaction, each checked against its expected old value
        (a ref to create must not exist yet), so a step is never silently overwritten."""
        zero = "0" * 40
        transaction = ["start"]
        for c in changes:
            if c.new is None:
                transaction.append(f"delete {c.ref} {c.old}")
            else:
                transaction.append(f"update {c.ref} {c.new} {c.old or zero}")
        transaction += ["prepare", "commit"]
        self._git("update-ref", "--stdin", stdin=("\n".join(transaction) + "\n").encode())
        if any(c.ref == MAIN for c in changes):
            self._sync_work_tree()

    def commit(self, files: dict[str, bytes], message: str, parent: str | None, ref: str,
               author: Signature = HARNESS, delete_refs: tuple[str, ...] = ()) -> str:
        """Write one commit holding exactly `files`, then move `ref` to it (and delete `delete_refs`) atomically.

        Compare-and-swap: `main` must still point at `parent`, and any other ref must not exist yet.
        """
        sha = self.write_commit(files, message, parent, author)
        expected = parent if ref == MAIN else None
        self.move_refs([RefChange(ref, sha, expected),
                        *(RefChange(name, None, self.resolve(name)) for name in delete_refs)])
        return sha

    # -- reading -----------------------------------------------------------------------------------------

    def resolve(self, ref: str) -> str | None:
        try:
            return self._git("rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}") or None
        except LedgerError:
            return None

    def _entry(self, sha: str, ref: str) -> Entry:
        commit = self.repo.commit(sha)
        message = commit.message if isinstance(commit.message, str) else commit.message.decode()
        parent = commit.parents[0].hexsha if commit.parents else None
        return Entry(sha=sha, ref=ref, parent=parent, message=message, trailers=parse_trailers(message))

    def main_line(self) -> list[Entry]:
        """The root commit and every accepted step, oldest first."""
        head = self.resolve(MAIN)
        if head is None:
            raise LedgerError(f"{self.path} has no main branch")
        shas = self._git("rev-list", "--first-parent", "--reverse", head).split()
        return [self._entry(sha, MAIN) for sha in shas]

    def first_parent_chain(self, sha: str) -> list[str]:
        """`sha` and its first-parent ancestors, root first: one kernel's lineage."""
        return self._git("rev-list", "--first-parent", "--reverse", sha).split()

    def refs(self, prefix: str) -> dict[str, str]:
        """refname -> commit for every ref under `prefix`."""
        out = self._git("for-each-ref", "--format=%(objectname) %(refname)", prefix)
        return {name: sha for sha, name in (line.split(" ", 1) for line in out.splitlines() if line)}

    def _entries_under(self, *prefixes: str) -> list[Entry]:
        entries = [self._entry(sha, ref) for prefix in prefixes for ref, sha in self.refs(prefix).items()]
        return sorted(entries, key=lambda e: (e.step, e.candidate))

    def attempts(self) -> list[Entry]:
        """Every commit on an attempt ref, ordered by step and candidate."""
        return self._entries_under(ATTEMPTS)

    def proposals(self) -> list[Entry]:
        """Candidates received from a proposer and not yet judged, ordered by step and candidate."""
        return self._entries_under(PROPOSALS)

    def off_main(self) -> list[Entry]:
        """Accepted kernels that are not on main's lineage (population and retired refs)."""
        return self._entries_under(POPULATION, RETIRED)

    def entries(self) -> list[Entry]:
        """Everything evaluated in this run (main line, other accepted kernels, attempts), by step and candidate."""
        return sorted(self.main_line() + self.off_main() + self.attempts(), key=lambda e: (e.step, e.candidate))

    def read(self, sha: str, name: str) -> bytes | None:
        """The content of file `name` in commit `sha`, or None when that commit does not hold it."""
        try:
            blob = self.repo.commit(sha).tree / name
        except KeyError:
            return None
        return blob.data_stream.read()

    def files(self, sha: str) -> dict[str, bytes]:
        return {blob.name: blob.data_stream.read() for blob in self.repo.commit(sha).tree.blobs}

    def fsck(self) -> tuple[bool, str]:
        """Run `git fsck --full`; dangling objects (from a killed writer) are not errors."""
        try:
            out = self.repo.git.execute(["git", "fsck", "--full", "--no-dangling"], with_extended_output=True)
        except git.GitCommandError as exc:
            return False, (exc.stderr or str(exc)).strip()
        return True, (out[1] + out[2]).strip()

