"""The `loopkata` command: list, check, hint, reset, restore, solution, watch, progress, room, scan, decoy, variant,
workshop."""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import sys
import time
from pathlib import Path

from .grading import runner
from .grading.report import render_text
from .guard import wrapper as guard_wrapper
from .learner import backups, export, hints, progress
from .model import alternatives, catalogue
from .model.paths import display_path, shown_path
from .room import command as room_command
from .room import effort, regrade, workshop


def _kata(name: str) -> catalogue.Kata:
    return catalogue.find(name)


def cmd_list(args) -> int:
    root = catalogue.project_root()
    katas = catalogue.load(root)
    records = effort.records(effort.ROOMS, root)
    rows = [
        {
            "id": k.id, "number": k.number, "title": k.title, "status": progress.status(k),
            "kata": display_path(k.kata_path), "solution": display_path(k.solution_path),
            "notebook": display_path(k.notebook_path), "tests": display_path(k.tests_path),
            "root": str(root.resolve()),  # new keys in every row keep older readers working
            "requires": list(k.requires), "minutes": k.minutes, "time": effort.time_label(k, records),
        }
        for k in katas
    ]
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(catalogue.describe_root(root))
    width = max((len(r["id"]) for r in rows), default=0)
    by_id = {k.id: k for k in katas}
    for r in rows:
        print(f"{r['number']:02d} {r['id']:<{width}} {r['status']:<10} {r['title']}")
        print(f"   edit {r['kata']}   notebook {r['notebook']}")
        print(f"   do first: {effort.needs_label(by_id[r['id']], katas)}   time: {r['time']}")
    return 0


def _not_saved(problem: progress.NotSaved) -> None:
    """One line after the command's own output: its result stands, only the record is lost."""
    sys.stdout.flush()
    print(problem, file=sys.stderr)


def _check_once(kata: catalogue.Kata, impl, as_json: bool, exitfirst: bool = False) -> runner.CheckResult:
    result = runner.check(kata, impl, until_failed=exitfirst)
    problem = None
    if impl is None:
        try:
            progress.record_check(kata, result)
        except progress.NotSaved as exc:
            problem = exc  # reported after the verdict, which matters more
    if as_json:
        print(json.dumps(result.to_json(), indent=2))
    else:
        print(render_text(result, kata))
        if result.passed:
            print(f"\nSolved. Compare with the reference fix: loopkata solution {kata.id}")
        elif result.verdict == runner.NOT_HERE:
            print("\nNot solved: this machine could not run every test. Nothing failed on what it could run.")
        elif result.verdict != runner.ERROR:
            print(f"\nStuck? loopkata hint {kata.id}")
    if problem:
        _not_saved(problem)
    return result


def _current_kata() -> catalogue.Kata:
    """The first kata not yet solved: the next one, once the kata in hand passes."""
    katas = catalogue.load()
    for k in katas:
        if progress.status(k) != progress.SOLVED:
            return k
    return katas[-1]


def _last_touched(kata: catalogue.Kata) -> float | None:
    """When the learner last checked or saved this kata (a Unix time), None if never."""
    times = []
    if not progress.is_untouched(kata):  # saved files of a kata still the starter say nothing
        times += [f.stat().st_mtime for f in catalogue.files_of(kata.kata_path) if f.exists()]
    checked = progress.entry(kata).get("checked_at")
    if checked:
        with contextlib.suppress(ValueError):
            times.append(time.mktime(time.strptime(checked, "%Y-%m-%d %H:%M:%S")))
    return max(times, default=None)


def _kata_in_hand() -> catalogue.Kata:
    """What a command grades, hints or resets when no kata is named: the kata last checked or
    edited, unless it is solved; else the first one not solved."""
    touched = [(t, k) for k in catalogue.load() if (t := _last_touched(k)) is not None]
    if touched:
        latest = max(touched, key=lambda tk: tk[0])[1]
        if progress.status(latest) != progress.SOLVED:
            return latest
    return _current_kata()


def _from_root(path: Path) -> str:
    """A path from the project's folder (katas/...), or whole when it lies elsewhere."""
    try:
        return str(Path(path).resolve().relative_to(catalogue.project_root().resolve()))
    except ValueError:
        return str(Path(path).resolve())


def _named_or_in_hand(name: str | None, command: str) -> catalogue.Kata:
    if name:
        return _kata(name)
    kata = _kata_in_hand()
    print(f"(no kata named: {command} {kata.id}, the kata in hand)")
    return kata


def cmd_check(args) -> int:
    kata = _kata(args.kata) if args.kata else _kata_in_hand()
    impl = args.impl
    for kind in alternatives.KINDS:
        if getattr(args, kind):  # a decoy or variant, named by kata and name
            impl = alternatives.find(kata, kind, getattr(args, kind))
    result = _check_once(kata, impl, args.json, args.exitfirst)
    return 0 if result.passed else 1


def cmd_alternative(args) -> int:
    """`loopkata decoy|variant list|build|new`: list a kata's, build one into a folder, write one from an edited copy."""
    kind, kata = args.command, _kata(args.kata)
    if args.action == "list":
        for path in kata.decoys if kind == "decoy" else kata.variants:
            diff = alternatives.read(kata, path)
            print(f"{path.stem}  ({_diff_lines(path)} lines, from the {diff.base})\n    {diff.sentence}")
        return 0
    if args.action == "build":
        path = alternatives.find(kata, kind, args.name)
        diff = alternatives.read(kata, path)
        if alternatives.target_in(kata, path, args.into).exists():
            raise FileExistsError(f"{shown_path(alternatives.target_in(kata, path, args.into))} exists already: "
                                  "build into another folder (--into), or remove it first")
        made = alternatives.build(kata, path, args.into, progress.starter_snapshots())
        print(f"Built the {kind} {path.stem} of {kata.id} from {alternatives.base_label(kata, diff)} into {shown_path(made)}.")
        print(f"To change it, edit that copy, then: loopkata {kind} new {kata.id} {path.stem} --from {shlex.quote(shown_path(made))} "
              f"--base {diff.base} --why {shlex.quote(diff.sentence)} --replace")
        return 0
    target = alternatives.make(kata, kind, args.name, args.source, args.base, args.why, notes=args.notes or "",
                               wrong_on_python=args.wrong_on_python, replace=args.replace)
    lines = _diff_lines(target)
    print(f"Wrote {shown_path(target)} ({lines} lines, a difference from the {args.base}); it applies to its base.")
    if lines > alternatives.SCREEN:
        other = "starter" if args.base == "reference" else "reference"
        print(f"It is longer than a screen ({alternatives.SCREEN} lines): a smaller change, or --base {other}, "
              "may say the same in fewer lines.")
    print(f"Prove it: pytest tests/test_katas_proven.py -k '{kata.id}-{kind}-{target.stem}-'")
    return 0


def _diff_lines(path: Path) -> int:
    return len(Path(path).read_text(encoding="utf-8").splitlines())


def cmd_hint(args) -> int:
    kata = _named_or_in_hand(args.kata, "loopkata hint")
    if progress.status(kata) == progress.SOLVED:
        print(hints.solved_message(kata))
        return 0
    try:
        choice, problem = hints.next_hint(kata), None
    except progress.NotSaved as exc:
        choice, problem = exc.result, exc
    print(hints.describe(kata, choice))
    if problem:
        _not_saved(problem)
    return 0


def cmd_reset(args) -> int:
    kata = _named_or_in_hand(args.kata, "loopkata reset")
    if progress.status(kata) != progress.MISSING and progress.is_untouched(kata):
        print(f"{_from_root(kata.kata_path)} is already the starter of {kata.id}: nothing to restore or to back up.")
        return 0
    try:
        saved, problem = backups.reset(kata), None
    except (progress.StarterUnavailable, backups.BackupFailed) as exc:
        print(exc, file=sys.stderr)  # refused before touching anything
        return 1
    except progress.NotSaved as exc:
        saved, problem = exc.result, exc
    print(f"Restored the starter of {kata.id} in {_from_root(kata.kata_path)}.")
    if saved is None:
        print(f"There was nothing to back up: {_from_root(kata.kata_path)} did not exist.")
    else:
        print(f"Your previous version is backed up in {_from_root(saved)}")
        print(f"To undo: loopkata restore {kata.id}")
    if problem:
        _not_saved(problem)
    return 0


def cmd_restore(args) -> int:
    """Bring back a backup made by reset (the latest by default)."""
    kata = _kata(args.kata)
    found = backups.backups(kata)
    if args.list:
        if not found:
            print(f"No backups of {kata.id} yet (reset and restore make them).")
        for b in found:
            print(f"{b.name}   {display_path(b)}")
        return 0
    if not found:
        print(f"There is no backup of {kata.id} to restore: `loopkata reset {kata.id}` makes one before it "
              "restores the starter.", file=sys.stderr)
        return 1
    chosen = found[-1]
    if args.backup:
        named = [b for b in found if b.name == args.backup or b == Path(args.backup).resolve()]
        if not named:
            print(f"There is no backup '{args.backup}' of {kata.id}. `loopkata restore {kata.id} --list` "
                  "shows the ones there are.", file=sys.stderr)
            return 1
        chosen = named[0]
    try:
        saved, problem = backups.restore(kata, chosen), None
    except backups.BackupFailed as exc:
        print(exc, file=sys.stderr)
        return 1
    except progress.NotSaved as exc:
        saved, problem = exc.result, exc
    print(f"Restored {display_path(kata.kata_path)} from the backup {chosen.name}.")
    if saved is not None:
        print(f"The version it replaced is backed up in {display_path(saved)} (loopkata restore {kata.id} {saved.name}).")
    if problem:
        _not_saved(problem)
    return 0


def cmd_solution(args) -> int:
    kata = _named_or_in_hand(args.kata, "loopkata solution")
    if progress.status(kata) != progress.SOLVED and not args.force:
        print(
            f"{kata.id} is not solved yet, so its reference fix stays hidden. Run `loopkata check {kata.id}` "
            f"until it passes, or `loopkata solution {kata.id} --force` to look now."
        )
        return 1
    if args.force:
        try:
            progress.update(kata, solution_seen=True)  # the notebook's "once solved" part opens too
        except progress.NotSaved:
            pass
    path = kata.solution_path
    for f in catalogue.files_of(path):
        print(f"# ---- {display_path(f)}")
        print(f.read_text(encoding="utf-8"))
    return 0


def _snapshot(kata: catalogue.Kata) -> dict:
    path = kata.kata_path
    return {f: f.stat().st_mtime_ns for f in catalogue.files_of(path) if f.exists()}


def _move_on(solved: catalogue.Kata) -> catalogue.Kata:
    """Like rustlings: once the kata in hand passes, say so and name the next one to edit."""
    following = _current_kata()
    if progress.status(following) == progress.SOLVED:
        print("\nEvery kata is solved. Ctrl-C to stop watching.")
        return solved
    print(f"\n{solved.id} is solved. Next: {following.label}, {following.title}.")
    print(f"Edit {display_path(following.kata_path)} (notebook: {display_path(following.notebook_path)}); "
          "it is checked on every save.")
    return following


def _name_the_next(solved: catalogue.Kata) -> None:
    """Watching one kata: once it passes, name the next one to take (watching goes on with this one)."""
    following = _current_kata()
    if progress.status(following) != progress.SOLVED:
        print(f"\nNext: {following.label}, {following.title} (loopkata watch {following.id}, or "
              f"{display_path(following.notebook_path)}).")


def cmd_watch(args) -> int:
    """Re-check whenever a kata file is saved, like rustlings watch. Ctrl-C to stop."""
    katas = [_kata(args.kata)] if args.kata else list(catalogue.load())
    seen = {k.id: _snapshot(k) for k in katas}
    current = _kata(args.kata) if args.kata else _kata_in_hand()
    print(f"Watching {'katas/' if not args.kata else display_path(current.kata_path)} (Ctrl-C to stop).\n")
    checking = None
    try:
        checking = current
        result = _check_once(current, None, False)
        checking = None
        if result.passed and not args.kata:
            current = _move_on(current)
        elif result.passed:
            _name_the_next(current)
        while True:
            time.sleep(args.interval)
            for k in katas:
                now = _snapshot(k)
                if now != seen[k.id]:
                    seen[k.id] = now
                    print(f"\n--- {time.strftime('%H:%M:%S')} {display_path(k.kata_path)} changed ---")
                    checking = k
                    result = _check_once(k, None, False)
                    checking = None
                    if result.passed and not args.kata:
                        current = _move_on(k)
                    elif result.passed:
                        _name_the_next(k)
            if args.once:
                return 0
    except KeyboardInterrupt:
        # Ctrl-C in the middle of a check: the grader has already stopped its processes.
        print("\nStopped; nothing was recorded." if checking else "\nStopped watching.")
        return 130 if checking else 0


def cmd_progress(args) -> int:
    if args.export:
        return export.cmd_export(args)
    katas = catalogue.load()
    statuses = [(k, progress.status(k)) for k in katas]
    counts = {s: sum(1 for _, st in statuses if st == s) for s in (progress.SOLVED, progress.ATTEMPTED, progress.UNTOUCHED)}
    if args.json:
        print(json.dumps({"counts": counts, "katas": {k.id: s for k, s in statuses}}, indent=2))
        return 0
    print(f"{counts['solved']} solved, {counts['attempted']} attempted, {counts['untouched']} untouched")
    width = max((len(k.id) for k, _ in statuses), default=0)
    for k, s in statuses:
        print(f"  {k.number:02d} {k.id:<{width}} {s}")
    return 0


def cmd_room(args) -> int:
    return room_command.cmd_room(args)


def cmd_scan(args) -> int:
    # Imported here for start-up speed: the scan's rules load only when a scan runs.
    from .scan import command

    return command.run(args.paths, args.select, args.ignore, args.format)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="loopkata", description="Katas for the asyncio bugs that only show in production.")
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("list", help="every kata with its status and paths")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_list)
    s = sub.add_parser("check", help="grade a kata with its hidden tests (default: the first one not solved)")
    s.add_argument("kata", nargs="?")
    which = s.add_mutually_exclusive_group()
    which.add_argument("--impl", type=Path, help="grade this file or folder instead of your copy in katas/ "
                                                 "(or a difference, NAME.diff, built from its base)")
    which.add_argument("--decoy", metavar="NAME", help="grade the kata's decoy NAME, a plausible wrong fix "
                                                       "(loopkata decoy list KATA names them)")
    which.add_argument("--variant", metavar="NAME", help="grade the kata's variant NAME, another right fix")
    s.add_argument("-x", "--exitfirst", action="store_true",
                   help="stop at the first test that fails or hangs, as pytest -x does")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_check)
    s = sub.add_parser("hint", help="the next hint, matched to your last failure")
    s.add_argument("kata", nargs="?", help="default: the kata last checked or edited")
    s.set_defaults(func=cmd_hint)
    s = sub.add_parser("reset", help="restore the starter (your version is backed up first)")
    s.add_argument("kata", nargs="?", help="default: the kata last checked or edited")
    s.set_defaults(func=cmd_reset)
    s = sub.add_parser("restore", help="bring back a backup that reset made (the latest by default)")
    s.add_argument("kata")
    s.add_argument("backup", nargs="?", help="a backup's name, as --list shows it")
    s.add_argument("--list", action="store_true", help="list the kata's backups, oldest first")
    s.set_defaults(func=cmd_restore)
    s = sub.add_parser("solution", help="show the reference fix once solved")
    s.add_argument("kata", nargs="?", help="default: the kata last checked or edited")
    s.add_argument("--force", action="store_true", help="show it even if not solved")
    s.set_defaults(func=cmd_solution)
    s = sub.add_parser("watch", help="re-check on every save")
    s.add_argument("kata", nargs="?")
    s.add_argument("--interval", type=float, default=0.5, help=argparse.SUPPRESS)
    s.add_argument("--once", action="store_true", help=argparse.SUPPRESS)  # one poll round, for tests
    s.set_defaults(func=cmd_watch)
    s = sub.add_parser("progress", help="solved / attempted / untouched")
    s.add_argument("--json", action="store_true")
    s.add_argument("--export", type=Path, metavar="FILE",
                   help="write your record (progress per kata and your kata files) as JSON for a facilitator")
    s.add_argument("--name", help="your name in the export (default: your login name)")
    s.add_argument("--without-files", action="store_true",
                   help="leave your kata files out of the export (a record to publish, e.g. in docs/workshop/records/)")
    s.set_defaults(func=cmd_progress)
    s = sub.add_parser("room", help="a workshop room: learners x katas from their exports, and a figure",
                       description="Read learners' exports (`loopkata progress --export`): print a table learner x "
                                   "kata, save a figure, and with --regrade grade every learner's files again here. "
                                   + regrade.PROMISE)
    s.add_argument("exports", nargs="+", type=Path, metavar="EXPORT", help="export files, or folders of them")
    s.add_argument("--figure", type=Path, default=Path("room.png"), metavar="PATH",
                   help="where to save the figure (PNG; default: room.png)")
    s.add_argument("--regrade", action="store_true",
                   help="grade every learner's files again here, each in a throw-away copy and a sandbox (bubblewrap) "
                        "where the machine has one, and mark the claims it contradicts")
    s.set_defaults(func=cmd_room)
    s = sub.add_parser("scan", help="find the collection's bugs in your own code (exit 1 if any)",
                       description="Find the bugs the katas teach in your own code: rule LKnn for kata nn, LK01 to LK16.")
    s.add_argument("paths", nargs="*", default=["."], metavar="PATH", help="files or folders (default: .)")
    s.add_argument("--format", choices=("text", "json", "sarif"), default="text")
    s.add_argument("--select", help="only these rules, comma-separated (LK01,LK04; a prefix like LK0 works)")
    s.add_argument("--ignore", help="skip these rules, comma-separated")
    s.set_defaults(func=cmd_scan)
    for kind, what in (("decoy", "a plausible wrong fix the hidden tests must reject"),
                       ("variant", "another right fix the hidden tests must pass")):
        s = sub.add_parser(kind, help=f"for kata authors: list, build or write a kata's {kind}s ({what})",
                           description=f"A {kind} is {what}, kept as a difference from the kata's reference fix or "
                                       f"its starter: tests/{alternatives.KINDS[kind]}/KATA/NAME.diff, whose first line "
                                       "says what it changes and why.")
        acts = s.add_subparsers(dest="action", required=True)
        a = acts.add_parser("list", help=f"the kata's {kind}s, each with its sentence")
        a.add_argument("kata")
        a = acts.add_parser("build", help=f"write the {kind} as it is graded (its base with its difference) into a folder")
        a.add_argument("kata")
        a.add_argument("name")
        a.add_argument("--into", type=Path, default=Path("."), metavar="FOLDER",
                       help="where to write it (default: here); it is named after the " + kind)
        a = acts.add_parser("new", help=f"write a {kind} from an edited copy of the reference fix or the starter",
                            description=f"Write tests/{alternatives.KINDS[kind]}/KATA/NAME.diff: the difference between "
                                        "the base and the edited copy, headed by the sentence. It is read back and applied "
                                        "to its base before the command ends.")
        a.add_argument("kata")
        a.add_argument("name", help="a file name: what it does, in words (one_lock_for_every_loop)")
        a.add_argument("--from", dest="source", type=Path, required=True, metavar="PATH",
                       help="the edited copy: a file for a one-file kata, a folder for a folder kata (a file it lacks "
                            "is the base's)")
        a.add_argument("--base", choices=("reference", "starter"), required=True,
                       help="what the copy was made from: the reference fix (solutions/) or the starter (katas/)")
        a.add_argument("--why", required=True, metavar="SENTENCE",
                       help=f"its first line: what it changes, and why that is {'wrong' if kind == 'decoy' else 'still right'}"
                            f" (\"{kind.capitalize()}: ...\")")
        a.add_argument("--notes", metavar="TEXT", help="more prose, after the header")
        if kind == "decoy":
            a.add_argument("--wrong-on-python", metavar="SPEC",
                           help='only wrong on these Pythons (">=3.12"); on the others it must pass')
        a.add_argument("--replace", action="store_true", help="write it again if it exists")
        s.set_defaults(func=cmd_alternative, wrong_on_python=None)
    guard_wrapper.add_parser(sub)
    workshop.add_parser(sub)
    return p


GREETING = """Loop Katas: asyncio and event-loop bugs that pass every local test, then break in
serverless functions, containers and worker fleets. Each kata is a notebook and a file to fix.

Start with `make lab` (notebooks/00_start_here.ipynb), or edit a kata below and run
`loopkata check` (or `loopkata watch`, which checks on every save). `loopkata --help` lists
every command.
"""


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv:  # like rustlings: greet, and show where things stand
        print(GREETING)
        argv = ["list"]
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (catalogue.UnknownKata, catalogue.CatalogueError, alternatives.UnknownAlternative) as exc:
        print(exc, file=sys.stderr)
        return 2
    except (alternatives.DifferenceError, alternatives.StarterUnavailable, FileExistsError) as exc:
        # a decoy that does not apply, a starter whose shipped copy is lost, a decoy that is there already
        print(exc, file=sys.stderr)
        return 1
    except FileNotFoundError as exc:
        print(exc, file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # the grader has already stopped every process of the check
        print("\nStopped; nothing was recorded.", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # Whoever read the output has stopped reading (`loopkata check | head -1`): end quietly, as
        # other command-line tools do. Standard output goes nowhere from now on, so that Python's
        # own flush at exit does not fail on the closed pipe again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141  # 128 + SIGPIPE: what a shell reports for a tool the closed pipe ended


if __name__ == "__main__":
    sys.exit(main())
