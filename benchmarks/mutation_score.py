"""How much of each reference fix its hidden tests pin down: a mutation score per kata.

For one kata or all, copies the kata's reference fix (a file, or a package) into a throw-away
folder, makes its mutants with cosmic-ray's operators (one small change each: `<` for `<=`,
`True` for `False`, a `break` for a `continue`, an `except` that catches nothing the code raises,
a number off by one, a decorator removed...) in every .py file of the fix that differs from the
shipped starter's (a file the kata gives unchanged is scaffolding, not the fix:
loopkata.authoring.mutation), and grades each mutant the way a learner's fix is graded,
`loopkata check KATA --impl <mutant copy> --exitfirst --json`, in a subprocess with the kata's
deadline: one failing test kills a mutant. The checkout is never written to.

    .venv/bin/python benchmarks/mutation_score.py [--kata ID ...] [-n WORKERS] [--list]

Per kata it prints: mutants, killed (the check failed), survived (the check passed), timed out
(the check's verdict was a hang, or the kata's budget ran out), equivalent (a survivor recorded
in tests/hidden/mutation/<kata-id>.toml as changing no behaviour, with the reason), the score
(killed and timed out over the mutants that are not equivalent) and the run's cost (wall time).
Every survivor that is not recorded as equivalent is printed with its diff: a behaviour of the
reference no hidden test pins.

Lines marked `# pragma: no mutate` are not mutated (the rule of cosmic-ray's `cr-filter-pragma`:
the line a mutation ends on). Only stand-ins carry the mark (a fake embedding, a sleep that plays
I/O, a demo constant), each with its reason in the comment; the code a lesson is about never does.

Each run writes its figures to benchmarks/mutation_score.json (a run of some katas replaces only
theirs), with the sha256 of every reference file mutated, from which
`python -m loopkata.authoring.tables --write` makes the README's "mutation score per kata" table;
tests/test_mutation_record.py names a kata whose reference changed since its mutation run.
This is an authoring step (`make mutation`), not part of `make test` or CI.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import datetime
import difflib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from loopkata.authoring.mutation import digests as reference_digests, mutated_files, shown_score  # noqa: E402
from loopkata.model import catalogue  # noqa: E402

RECORD = ROOT / "benchmarks" / "mutation_score.json"
EQUIVALENTS = ROOT / "tests" / "hidden" / "mutation"  # <kata-id>.toml: the survivors that change no behaviour
PRAGMA = re.compile(r".*#.*pragma:.*no mutate.*")  # cosmic-ray's cr-filter-pragma reads the same mark
KILLED, SURVIVED, TIMED_OUT, NOT_HERE = "killed", "survived", "timed out", "could not run here"
# Operators that take arguments (variable replacement and insertion) are left out: cosmic-ray yields
# them only when configured, and their mutants are random names, not plausible slips.


@dataclass
class Mutant:
    file: str  # relative to the reference fix's folder (its name, for a one-file kata)
    line: int
    operator: str  # cosmic-ray's operator name, e.g. core/ReplaceTrueWithFalse
    occurrence: int
    original: str  # the line before and after, stripped: what the equivalents file names
    mutated: str
    code: str = field(repr=False, default="")
    diff: str = field(repr=False, default="")

    @property
    def key(self) -> tuple:
        return (self.file, self.line, self.operator.split("/")[-1], self.mutated)


NOTHING_RAISES = "CosmicRayTestingException"  # cosmic-ray's name for an exception no code raises
# Defined after the module's last line, so every other line keeps its number; looked up only when an except runs.
NOTHING_RAISES_DEFINED = f"\n\nclass {NOTHING_RAISES}(Exception):\n    pass\n"


def _caught(code: str) -> list[tuple[int, int, int]]:
    """(line, start column, end column) of every name an `except` clause catches, in the order of the source."""
    import ast

    spans = []
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.ExceptHandler) and node.type is not None:
            names = node.type.elts if isinstance(node.type, ast.Tuple) else [node.type]
            spans += [(n.lineno, n.col_offset, n.end_col_offset) for n in names if n.lineno == n.end_lineno]
    return sorted(spans)


def _annotations(code: str) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """The (start, end) of every annotation that is never evaluated: all of them in a module with
    `from __future__ import annotations` (PEP 563 keeps them as strings), none elsewhere. A mutant
    of one (`list[str] | None` made `list[str] + None`) changes no behaviour, so none is made."""
    import ast

    tree = ast.parse(code)
    postponed = any(isinstance(n, ast.ImportFrom) and n.module == "__future__" and
                    any(a.name == "annotations" for a in n.names) for n in tree.body)
    if not postponed:
        return []
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            a = node.args
            found += [arg.annotation for arg in [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg]
                      if arg is not None and arg.annotation is not None]
            found += [node.returns] if node.returns is not None else []
        elif isinstance(node, ast.AnnAssign):
            found.append(node.annotation)
    return [((n.lineno, n.col_offset), (n.end_lineno, n.end_col_offset)) for n in found]


def mutants_of(kata) -> list[Mutant]:
    """Every mutant of the reference, but none on a line marked `# pragma: no mutate`."""
    import cosmic_ray.plugins
    from cosmic_ray.ast import ast_nodes, get_ast
    from cosmic_ray.mutating import mutate_code

    operators = [(name, cosmic_ray.plugins.get_operator(name)) for name in cosmic_ray.plugins.operator_names()]
    # cosmic-ray's ExceptionReplacer fails on a dotted name (`except asyncio.CancelledError`): its rule is applied
    # below through the standard library's ast instead, to every name an `except` catches.
    operators = [(name, cls()) for name, cls in operators if not cls.arguments() and not name.endswith("/ExceptionReplacer")]
    found = []
    for name, path in mutated_files(kata).items():
        code = path.read_text(encoding="utf-8")
        lines = code.splitlines()
        module = get_ast(code)
        for occurrence, (line, start, end) in enumerate(_caught(code)):
            if PRAGMA.match(lines[line - 1]):
                continue
            text = lines[line - 1]
            new = text[:start] + NOTHING_RAISES + text[end:]
            mutated = "\n".join(lines[:line - 1] + [new] + lines[line:]) + "\n" + NOTHING_RAISES_DEFINED
            diff = "".join(difflib.unified_diff(code.splitlines(True), (mutated + "\n").splitlines(True)[:len(lines)],
                                                f"a/{name}", f"b/{name}", n=1))
            found.append(Mutant(name, line, "core/ExceptionReplacer", occurrence, text.strip(), new.strip(), mutated, diff))
        unevaluated = _annotations(code)
        for op_name, operator in operators:
            positions = [(s, e) for node in ast_nodes(module) for s, e in operator.mutation_positions(node)]
            for occurrence, (start, end) in enumerate(positions):
                last = end[0] - 1 - (end[1] == 0)
                if PRAGMA.match(lines[last]) or any(a <= start and end <= b for a, b in unevaluated):
                    continue
                mutated = mutate_code(code, operator, occurrence)
                if mutated is None or mutated == code:
                    continue
                new_lines = mutated.splitlines()
                changed = next((i for i, (a, b) in enumerate(zip(lines, new_lines)) if a != b), start[0] - 1)
                diff = "".join(difflib.unified_diff(code.splitlines(True), mutated.splitlines(True),
                                                    f"a/{name}", f"b/{name}", n=1))
                found.append(Mutant(name, changed + 1, op_name, occurrence, lines[changed].strip(),
                                    new_lines[changed].strip() if changed < len(new_lines) else "",
                                    mutated, diff))
    return found


def equivalents(kata_id: str) -> dict[tuple, dict]:
    """The kata's recorded equivalent mutants, by (file, line, operator, mutated line)."""
    path = EQUIVALENTS / f"{kata_id}.toml"
    if not path.exists():
        return {}
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    return {(e["file"], e["line"], e["operator"], e["mutated"]): e for e in data.get("equivalent", [])}


def grade(kata, mutant: Mutant, workdir: Path, env: dict, timeout: float) -> tuple[str, str]:
    """(outcome, verdict) of `loopkata check` on a copy of the reference with this one mutation."""
    folder = Path(tempfile.mkdtemp(prefix="mutant-", dir=workdir))
    try:
        source = kata.solution_path
        if source.is_file():
            impl = folder / source.name
            impl.write_text(mutant.code, encoding="utf-8")
        else:
            impl = folder / source.name
            shutil.copytree(source, impl, ignore=shutil.ignore_patterns("__pycache__"))
            (impl / mutant.file).write_text(mutant.code, encoding="utf-8")
        cmd = [sys.executable, "-m", "loopkata", "check", kata.id, "--impl", str(impl), "--exitfirst", "--json"]
        try:
            # cwd: loopkata finds its catalogue from there; a check of an --impl writes nothing into the checkout
            done = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, timeout=timeout, check=False)
        except subprocess.TimeoutExpired:
            return TIMED_OUT, "no verdict in time"
        try:
            verdict = json.loads(done.stdout)["verdict"]
        except (ValueError, KeyError):
            # not a verdict on the mutant: the command itself broke, and a broken run must not read as a kill
            raise SystemExit(f"`{' '.join(cmd)}` gave no verdict (exit {done.returncode}):\n{done.stderr[-2000:]}")
        if verdict == "passed":
            return SURVIVED, verdict
        if verdict == "hang":
            return TIMED_OUT, verdict
        if verdict == "could not run here":
            return NOT_HERE, verdict
        return KILLED, verdict
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def run_kata(kata, workers: int, env: dict, workdir: Path, quiet: bool) -> dict:
    started = time.perf_counter()
    mutants = mutants_of(kata)
    timeout = kata.budget_seconds * 3 + 30  # the check kills its own child at the budget; this only guards the guard
    outcomes: dict[int, tuple[str, str]] = {}
    lock = threading.Lock()

    def one(i: int) -> None:
        outcomes[i] = grade(kata, mutants[i], workdir, env, timeout)
        if not quiet:
            with lock:
                print(f"  {len(outcomes):>3}/{len(mutants)} {outcomes[i][0]:<10} {mutants[i].file}:{mutants[i].line} "
                      f"{mutants[i].operator.split('/')[-1]}", file=sys.stderr, flush=True)

    with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
        list(pool.map(one, range(len(mutants))))
    seconds = time.perf_counter() - started
    counts = {KILLED: 0, SURVIVED: 0, TIMED_OUT: 0, NOT_HERE: 0}
    survivors = []
    for i, m in enumerate(mutants):
        outcome = outcomes[i][0]
        counts[outcome] += 1
        if outcome == SURVIVED:
            survivors.append({"file": m.file, "line": m.line, "operator": m.operator.split("/")[-1],
                              "original": m.original, "mutated": m.mutated, "diff": m.diff})
    figures = {"mutants": len(mutants), "killed": counts[KILLED], "timed_out": counts[TIMED_OUT],
               "not_here": counts[NOT_HERE], "seconds": round(seconds, 1), "workers": workers,
               "survivors": survivors, "reference_sha256": reference_digests(kata)}
    return score(kata.id, figures)


def score(kata_id: str, figures: dict) -> dict:
    """Split the survivors into those recorded as equivalent and the rest, and score what is left."""
    known = equivalents(kata_id)
    everyone = figures.get("survivors", []) + figures.get("equivalent_survivors", [])

    def key(s: dict) -> tuple:
        return (s["file"], s["line"], s["operator"], s["mutated"])

    figures["equivalent_survivors"] = [s for s in everyone if key(s) in known]
    figures["survivors"] = [s for s in everyone if key(s) not in known]
    figures["equivalent"], figures["survived"] = len(figures["equivalent_survivors"]), len(figures["survivors"])
    graded = figures["mutants"] - figures["equivalent"] - figures.get("not_here", 0)
    figures["score"] = round((figures["killed"] + figures["timed_out"]) / graded, 4) if graded else 1.0
    seen = {key(s) for s in everyone}
    figures["equivalents_not_seen_surviving"] = [list(k) for k in known if k not in seen]
    return figures


def rescore() -> None:
    """Re-read every kata's equivalents file against its last run's survivors, grading nothing."""
    record = json.loads(RECORD.read_text(encoding="utf-8"))
    for k in catalogue.load():
        figures = record["katas"].get(k.id)
        if figures is None:
            continue
        if figures.get("reference_sha256") != reference_digests(k):
            print(f"{k.id}: its reference changed since its run; run it again (--kata {k.id})")
            continue
        score(k.id, figures)
        print(f"{k.number:02d} {k.id:<25} survived {figures['survived']:>3}, equivalent {figures['equivalent']:>3}, "
              f"score {shown_score(figures['score'], figures['survived'])}")
    RECORD.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n", encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kata", action="append", help="only this kata (id or number; repeat for more)")
    parser.add_argument("-n", "--workers", type=int, default=os.cpu_count() or 1, help="mutants graded at once")
    parser.add_argument("--list", action="store_true", help="count the mutants per kata, grade none")
    parser.add_argument("--quiet", action="store_true", help="no line per mutant")
    parser.add_argument("--rescore", action="store_true",
                        help="grade nothing: re-read tests/hidden/mutation/*.toml against the recorded survivors")
    args = parser.parse_args()
    if args.rescore:
        return rescore()
    try:  # as the CLI looks a kata up: "bound-semaphore", "1" or "01"
        katas = [catalogue.find(a) for a in args.kata] if args.kata else catalogue.load()
    except catalogue.UnknownKata as exc:
        raise SystemExit(str(exc)) from None
    if args.list:
        for k in katas:
            print(f"{k.label}: {len(mutants_of(k))} mutants")
        return
    workdir = Path(tempfile.mkdtemp(prefix="loopkata-mutation-"))
    env = {**os.environ, "LOOPKATA_STATE": str(workdir / "state"), "PYTHONPATH": str(ROOT / "src")}
    print(f"`loopkata check` on every mutant of each reference fix, {args.workers} at once, {os.cpu_count()} cores, "
          f"Python {sys.version.split()[0]}\n")
    header = f"{'kata':<28} {'mutants':>7} {'killed':>6} {'survived':>8} {'timed out':>9} {'equivalent':>10} {'score':>6} {'cost':>8}"
    measured = {}
    try:
        for k in katas:
            print(f"{k.label} ...", file=sys.stderr, flush=True)
            got = measured[k.id] = run_kata(k, args.workers, env, workdir, args.quiet)
            write_record({k.id: got})  # each kata as it ends: a long run stopped half-way keeps what it measured
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print(header)
    for k in katas:
        got = measured[k.id]
        print(f"{k.number:02d} {k.id:<25} {got['mutants']:>7} {got['killed']:>6} {got['survived']:>8} "
              f"{got['timed_out']:>9} {got['equivalent']:>10} {shown_score(got['score'], got['survived']):>6} {got['seconds']:>7.0f}s"
              + (f"  ({got['not_here']} could not run here)" if got["not_here"] else ""))
    for k in katas:
        got = measured[k.id]
        for s in got["survivors"]:
            print(f"\nsurvivor in {k.id}: {s['file']}:{s['line']} {s['operator']}\n{s['diff']}")
        for e in got["equivalents_not_seen_surviving"]:
            print(f"\n{k.id}: recorded as equivalent but not seen surviving (killed, or its line moved): {e}")
    print(f"\nfigures written to {RECORD.relative_to(ROOT)}; `python -m loopkata.authoring.tables --write` "
          "puts them in the README")


def write_record(measured: dict) -> None:
    """Merge this run's figures into the record the README's table is made from."""
    try:
        record = json.loads(RECORD.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        record = {"katas": {}}
    for kata_id, figures in measured.items():
        figures["measured"] = {"date": datetime.date.today().isoformat(), "cores": os.cpu_count(),
                               "python": sys.version.split()[0], "tool": f"cosmic-ray {_cosmic_ray_version()}"}
        record["katas"][kata_id] = figures
    RECORD.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n", encoding="utf-8")


def _cosmic_ray_version() -> str:
    from importlib.metadata import version
    return version("cosmic-ray")


if __name__ == "__main__":
    main()
