"""Re-grading a learner's exported files on the facilitator's machine, without trusting them.

Each kata of each learner is graded in a throw-away copy of what grading needs (the
catalogue, the kata's hidden tests and this engine) holding the learner's files, never in
the facilitator's checkout. The grading runs `loopkata check` there, in a sandbox where the
machine allows it (loopkata.room.sandbox), with a scrubbed environment: no variable of the
facilitator's, HOME, TMPDIR and the working folder private to that one re-grade.

What a re-grade proves: the learner's files, run here on this machine's hidden tests,
passed or failed. That is stronger than the learner's own claim, but not proof against a
learner who sets out to fool it: their code runs in the same process as the tests it is
graded by, so it can forge its own report. It cannot reach the facilitator's files, nor
another learner's re-grade.

A re-grade that gave no verdict (the check did not report, or reported that it could not grade)
contradicts no claim: the evidence is missing, not contrary. The machine (a process limit
lowered, a grader that crashed) or the learner's code may have caused it, and from here the two
cannot be told apart. It confirms no claim either, so a learner whose code breaks its grader
gains nothing: the claim counts as not verified, and the room reports the re-grade as a problem
of its own.
"""
from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from .. import services
from ..grading import runner
from ..grading.cpu_wait import stretch_cap
from ..learner import progress
from ..model import catalogue, starters
from ..model.paths import display_path
from . import sandbox
from .exports import Record, visible
from .standing import CONFIRMED, CONTRADICTED
from .table import names

GRADED, STARTER, UNAVAILABLE, REFUSED, NOTHING = "graded", "starter", "unavailable", "refused", "nothing"
NO_VERDICT = "no verdict"  # "could not grade it": the check gave no report, or reported it could not grade
PROMISE = ("A re-grade runs each learner's files on this machine's hidden tests, in a throw-away copy "
           "and a sandbox: stronger than the learner's claim, but no proof against a learner who sets "
           "out to fool it (their code runs beside the tests that grade it).")


@dataclass
class Regrade:
    index: int  # which record
    learner: str
    kata: catalogue.Kata
    claimed: str
    how: str  # GRADED, STARTER (not graded: the starter as shipped), UNAVAILABLE, NO_VERDICT, REFUSED, NOTHING
    detail: str  # "passes all 5", "fails 2 of 5", "could not grade it: ..."
    passed: bool = False
    failing: list[str] = field(default_factory=list)

    @property
    def differs(self) -> bool:
        """The claim and the evidence disagree: a re-grade that could not run here, or gave no verdict,
        proves nothing."""
        return self.how not in (UNAVAILABLE, NO_VERDICT) and (self.claimed == progress.SOLVED) != self.passed

    @property
    def found(self) -> str | None:
        """What the re-grade found of the claim (standing.CONFIRMED or CONTRADICTED); None when it did not check it."""
        if self.differs:
            return CONTRADICTED
        return CONFIRMED if self.how == GRADED else None

    def line(self) -> str:
        more = f"; and {len(self.failing) - 3} more" if len(self.failing) > 3 else ""
        titles = f" ({'; '.join(self.failing[:3])}{more})" if self.failing else ""
        return f"{self.learner}, {self.kata.label}: claimed {self.claimed}, re-grade {self.detail}{titles}"


def _is_starter(kata: catalogue.Kata, files: dict[str, bytes]) -> bool:
    want = {(PurePosixPath("katas") / rel.as_posix()).as_posix(): e.get("sha256")
            for rel, e in starters.expected(kata).items()}
    return bool(want) and set(files) == set(want) and all(starters.sha256(d) == want[p] for p, d in files.items())


def _belongs(kata: catalogue.Kata, path: str) -> bool:
    own = PurePosixPath("katas") / kata.path
    return PurePosixPath(path) == own or own in PurePosixPath(path).parents


def grading_copy(kata: catalogue.Kata, files: dict[str, bytes], into: Path) -> Path:
    """What grading `kata` needs, copied into `into` with the learner's files in katas/: the
    catalogue, the hidden tests and this engine (imported from engine/, not from the checkout)."""
    (into / "katas").mkdir(parents=True)
    for name in ("catalogue.toml", "starters.toml"):
        if (kata.root / "katas" / name).is_file():
            shutil.copy2(kata.root / "katas" / name, into / "katas" / name)
    shutil.copytree(kata.tests_path.parent, into / "tests" / "hidden",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(Path(__file__).resolve().parents[1], into / "engine" / "loopkata",  # the whole package
                    ignore=shutil.ignore_patterns("__pycache__"))
    for rel, data in files.items():
        target = into.joinpath(*PurePosixPath(rel).parts)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    return into


def _read_report(ran: sandbox.Ran) -> runner.CheckResult | str:
    """The check's JSON report, or why there is none (one line)."""
    try:
        return runner.CheckResult.from_json(json.loads(ran.stdout.decode("utf-8", errors="replace")))
    except (ValueError, TypeError, RecursionError):
        said = ran.stderr.decode("utf-8", errors="replace").strip().splitlines()
        return f"the check gave no report (exit status {ran.status}; {said[-1][:200] if said else 'nothing on stderr'})"


def kata_seconds(kata: catalogue.Kata) -> float:
    """The longest one re-grade of `kata` may take, seen from outside its sandbox: its check's own
    deadline, stretched as far as the check may stretch it on a busy machine, and a minute more."""
    return kata.budget_seconds * stretch_cap() + 60


def learner_seconds(katas: Iterable[catalogue.Kata]) -> float:
    """What all of one learner's re-grades may take together: each kata's budget once, and a minute.
    An honest check takes a fraction of its budget; code that holds its check up (SIGSTOP, a sleep
    past every deadline inside) spends this learner's time only, never another learner's."""
    return sum(k.budget_seconds for k in katas) + 60


def grade_in_jail(kata: catalogue.Kata, files: dict[str, bytes], use_sandbox: bool = True,
                  seconds: float | None = None) -> tuple[runner.CheckResult | str, sandbox.Jail | None]:
    """Grade the learner's `files` for `kata` in a throw-away copy (and a sandbox where possible),
    ended after `seconds` (kata_seconds when None) whatever the code inside does."""
    bound = kata_seconds(kata) if seconds is None else seconds
    if bound < 1:
        return "this learner's re-grades had used up the time they may take together", None
    tmp = Path(tempfile.mkdtemp(prefix="loopkata-regrade-"))
    try:
        lent = grading_copy(kata, files, tmp / "lent")
        jail = sandbox.jail(lent, tmp / "private", sandbox=use_sandbox)
        root = jail.path(lent)
        cmd = [sys.executable, "-m", "loopkata", "check", kata.id, "--json",
               "--impl", str(root / "katas" / kata.path)]
        env = {"LOOPKATA_ROOT": str(root), "LOOPKATA_STATE": str(jail.home / ".loopkata"),
               "LOOPKATA_SERVICE_DATA": str(jail.home / ".loopkata"),
               "PYTHONPATH": str(root / "engine"), "PYTHONDONTWRITEBYTECODE": "1", "PYTHONUNBUFFERED": "1",
               "LOOPKATA_STRETCH_CAP": str(stretch_cap())}  # the facilitator's, so the bound below stays behind it
        try:  # the check keeps its own deadline; this one holds whatever the code does to that one
            ran = jail.run(cmd, env, timeout=bound, outputs=tmp / "outputs",
                           memory_bytes=kata.memory_mib << 20)
        except subprocess.TimeoutExpired:
            return f"the check did not end within the {bound:.0f} s it was allowed", jail
        if ran.stopped:
            return "every process of the check stopped itself (SIGSTOP), so it was ended", jail
        return _read_report(ran), jail
    finally:
        remove_tree(tmp)


def remove_tree(folder: Path) -> None:
    """Remove `folder` whatever the learner's code left in it (a tree deeper than Python's
    recursion allows, folders it may not read); what cannot be removed is left, never raised."""
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        subprocess.run(["chmod", "-R", "u+rwx", "--", str(folder)], capture_output=True, timeout=300)
        subprocess.run(["rm", "-rf", "--", str(folder)], capture_output=True, timeout=300)
    if folder.exists():
        with contextlib.suppress(Exception):
            shutil.rmtree(folder, ignore_errors=True)


def regrade_one(kata: catalogue.Kata, rec, learner: str = "", index: int = 0,
                use_sandbox: bool = True, seconds: float | None = None) -> Regrade:
    """Grade one learner's files for one kata, and compare with what they claim."""
    out = Regrade(index, learner, kata, rec.status, NOTHING, "has no files to grade")
    if not rec.files:
        return out
    strays = sorted(p for p in rec.files if not _belongs(kata, p))
    if strays:
        out.how, out.detail = REFUSED, f"refused: files that are not the kata's ({', '.join(strays)})"
        return out
    if rec.status != progress.SOLVED and _is_starter(kata, rec.files):
        out.how, out.detail = STARTER, "not needed: the starter as shipped, which fails by design"
        return out
    unavailable = services.problem(kata.services)
    if unavailable:
        out.how, out.detail = UNAVAILABLE, f"not possible on this machine: {unavailable}"
        return out
    graded, _ = grade_in_jail(kata, rec.files, use_sandbox, seconds)
    if isinstance(graded, str):
        out.how, out.detail = NO_VERDICT, f"could not grade it: {graded}"
        return out
    out.how = GRADED
    out.passed, total = graded.passed, len(graded.tests)
    if graded.passed:
        out.detail = f"passes all {total}"
    elif graded.verdict == runner.NOT_HERE:
        out.how, out.detail = UNAVAILABLE, f"not possible on this machine: {graded.problem.strip().splitlines()[0]}"
    elif graded.verdict == runner.ERROR:
        said = (graded.problem.strip().splitlines() or ["no reason given"])[0]
        out.how, out.detail = NO_VERDICT, f"could not grade it: {said}"
    else:
        out.detail = f"fails {len(graded.failures)} of {total}"
        out.failing = [t.title for t in graded.failures]
    return out


def regrade_room(records: list[Record], katas: Iterable[catalogue.Kata],
                 announce=print) -> tuple[list[Regrade], list[str]]:
    """Re-grade every kata of every record that claims something, with `katas` (this machine's
    catalogue); one Regrade each, and one line per kata the catalogue does not have. Each learner's
    re-grades share learner_seconds of their katas: one learner can hold the room up no longer."""
    by_id = {k.id: k for k in katas}
    results, problems = [], []
    for i, (name, record) in enumerate(zip(names(records), records)):
        known = {kata_id: by_id[kata_id] for kata_id in record.katas if kata_id in by_id}
        until = time.monotonic() + learner_seconds(known.values())
        for kata_id, rec in record.katas.items():
            kata = known.get(kata_id)
            if kata is None:
                problems.append(f"{visible(display_path(record.source))}: kata {visible(kata_id)!r} is not in this "
                                "catalogue, so it was not re-graded")
                continue
            try:
                one = regrade_one(kata, rec, name, i, seconds=min(kata_seconds(kata), until - time.monotonic()))
            except Exception as exc:  # one learner's files never cost the room the others' results
                one = Regrade(i, name, kata, rec.status, NO_VERDICT,
                              f"could not grade it: the re-grade itself failed ({type(exc).__name__}: {exc})"[:300])
            results.append(one)
            if one.how not in (STARTER, NOTHING) or one.differs:
                mark = "   <- differs from the claim" if one.differs else ""
                announce(visible(f"  {name}, {kata.label}: claimed {rec.status}, re-grade {one.detail}") + mark)
    return results, problems
