"""A workshop room: each learner exports their record, the facilitator reads the room
and re-grades the learners' files, and a forged claim does not survive the re-grade.

Real checks run on a temporary copy of the project with its own state folder, so
the learner's own files and progress are never touched. Kata bound-semaphore is
used throughout: its checks take about a second.
"""
import json
import os
import re
import struct
from datetime import datetime
from pathlib import Path

from loopkata.learner import export
from loopkata.grading import runner
from loopkata.learner import progress
from loopkata.model import catalogue
from loopkata.room.exports import load_room
from loopkata.room.figure import figure
from loopkata.room.table import columns, table
from test_state import loopkata, make_project

ROOT = Path(__file__).resolve().parents[1]
KATA = "bound-semaphore"
KATA_FILE = "katas/01_bound_semaphore.py"


def read_json(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def room_env() -> dict:
    """The facilitator's own checkout: this project."""
    return {**os.environ, "LOOPKATA_ROOT": str(ROOT)}


def an_export(learner: str, status: str, checks: int, seconds=None, failing=(), files=None) -> dict:
    """An export as `loopkata progress --export` writes it, with bound-semaphore only."""
    return {
        "format": export.FORMAT, "version": export.VERSION, "learner": learner, "exported_at": "2026-12-01T09:00:00+00:00",
        "katas": {KATA: {
            "number": 1, "title": "The semaphore bound to a dead loop", "status": status, "checks": checks,
            "seconds_to_solve": seconds, "hints_seen": [], "solution_seen": False, "last_verdict": "",
            "failing": [{"title": t, "outcome": "failed", "message": "expected it to pass"} for t in failing],
            "files": [{"path": p, "text": text} for p, text in (files or {}).items()],
        }},
    }


def write(path: Path, data) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, bytes):
        path.write_bytes(data)
    else:
        path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    return path


def table_row(stdout: str, first: str) -> list[str]:
    """The cells of the table row that starts with `first` (cells are two or more spaces apart)."""
    rows = [re.split(r"\s{2,}", line.strip()) for line in stdout.splitlines() if line.startswith(first + " ")]
    assert len(rows) == 1, f"expected one table row for {first!r}, got {len(rows)} in:\n{stdout}"
    return rows[0]


def room_of(tmp_path, monkeypatch, *exports_: dict) -> list:
    """The records of `exports_`, read as `loopkata room` reads them in this checkout."""
    monkeypatch.setenv("LOOPKATA_ROOT", str(ROOT))
    paths = [write(tmp_path / "exports" / f"{data['learner']}.json", data) for data in exports_]
    records, problems = load_room(paths)
    assert not problems, f"expected every export read, got: {problems}"
    return records


def saved_figure(tmp_path, monkeypatch, records):
    """The room's figure as matplotlib laid it out when `figure` saved it (to tmp_path/room.png)."""
    from matplotlib.figure import Figure

    saved, real_savefig = [], Figure.savefig

    def keep(fig, *args, **kwargs):
        saved.append(fig)
        return real_savefig(fig, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", keep)
    figure(records, columns(records), tmp_path / "room.png")
    assert len(saved) == 1, f"expected the figure saved once, got {len(saved)} saves"
    return saved[0]


def figure_texts(fig) -> list[str]:
    """Every visible text of the figure, its lines joined by single spaces (a wrapped label reads as one)."""
    from matplotlib.text import Text

    return [" ".join(t.get_text().split()) for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()]


def stuck_panel(fig):
    """The figure's panel of where the room is stuck."""
    from matplotlib.axes import Axes

    panel = [ax for ax in fig.findobj(Axes) if ax.get_title().startswith("Where the room is stuck")]
    assert len(panel) == 1, f"expected one panel titled 'Where the room is stuck', got {len(panel)}"
    return panel[0]


def stuck_labels(fig) -> list[str]:
    """The labels of the figure's panel of where the room is stuck, top to bottom, lines joined by spaces."""
    ax = stuck_panel(fig)
    ticks = sorted(ax.get_yticklabels(), key=lambda t: -ax.transData.transform((0, t.get_position()[1]))[1])
    return [" ".join(t.get_text().split()) for t in ticks]


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"expected a PNG file at {path}, got one starting {data[:8]!r}"
    return struct.unpack(">II", data[16:24])


# --- 1. the learner's export ------------------------------------------------------------

def test_an_export_after_real_checks_holds_checks_time_hints_failing_tests_and_files(tmp_path):
    """after a failed check, a hint and a passing check, the export says all of it, with the learner's files"""
    root, env = make_project(tmp_path)
    first = loopkata(env, "check", KATA, "--json", cwd=root)
    assert first.returncode == 1, f"expected the starter to fail its check (exit 1), got {first.returncode}:\n{first.stderr}"
    graded = runner.CheckResult.from_json(json.loads(first.stdout))
    hint = loopkata(env, "hint", KATA, cwd=root).stdout
    assert re.match(r"Hint 1 of", hint), f"expected the first hint to be numbered 1, got {hint!r}"
    # the export names each hint by its number in the catalogue
    hint_number = next(i for i, h in enumerate(catalogue.find(KATA, root).hints, 1) if h.text in hint)

    out = loopkata(env, "progress", "--export", str(tmp_path / "attempted.json"), "--name", "alice", cwd=root)
    assert out.returncode == 0 and "attempted.json" in out.stdout, \
        f"expected exit 0 and a line naming the file, got {out.returncode}:\n{out.stdout}{out.stderr}"
    data = read_json(tmp_path / "attempted.json")
    assert (data["format"], data["version"], data["learner"]) == (export.FORMAT, export.VERSION, "alice"), \
        f"expected format {export.FORMAT!r}, version {export.VERSION} and learner 'alice', got {data['format']!r}, " \
        f"{data['version']!r}, {data['learner']!r}"
    assert datetime.fromisoformat(data["exported_at"]).tzinfo is not None, \
        f"expected an ISO 8601 time with its zone, got {data['exported_at']!r}"
    assert set(data["katas"]) == {k.id for k in catalogue.load(root)}, \
        f"expected every kata of the catalogue, got {sorted(data['katas'])}"
    tried = data["katas"][KATA]
    expected_failing = [(t.title, t.message) for t in graded.failures]
    got_failing = [(t["title"], t["message"]) for t in tried["failing"]]
    assert got_failing == expected_failing, \
        f"expected the failing tests of the last check:\n{expected_failing}\ngot:\n{got_failing}"
    assert (tried["status"], tried["checks"], tried["seconds_to_solve"], tried["hints_seen"]) == \
        ("attempted", 1, None, [hint_number]), \
        f"expected attempted, 1 check, no time to solve, hint {hint_number} seen; got {tried['status']}, " \
        f"{tried['checks']} checks, {tried['seconds_to_solve']} s, hints {tried['hints_seen']}"
    starter = (root / KATA_FILE).read_text(encoding="utf-8")
    assert tried["files"] == [{"path": KATA_FILE, "text": starter}], \
        f"expected the learner's file {KATA_FILE} with its text, got paths {[f['path'] for f in tried['files']]}"
    untouched = data["katas"]["loop-id-reuse"]
    assert (untouched["status"], untouched["checks"], untouched["failing"]) == ("untouched", 0, []), \
        f"expected loop-id-reuse untouched with no check, got {untouched['status']}, {untouched['checks']} checks"

    solution = (root / "solutions" / "01_bound_semaphore.py").read_text(encoding="utf-8")
    (root / KATA_FILE).write_text(solution, encoding="utf-8")
    solved_check = loopkata(env, "check", KATA, cwd=root)
    assert solved_check.returncode == 0, f"expected the reference fix to pass, got:\n{solved_check.stdout}"
    loopkata(env, "progress", "--export", str(tmp_path / "solved.json"), "--name", "alice", cwd=root)
    solved = read_json(tmp_path / "solved.json")["katas"][KATA]
    assert (solved["status"], solved["checks"], solved["failing"]) == ("solved", 2, []), \
        f"expected solved after 2 checks with nothing failing, got {solved['status']}, {solved['checks']} checks, " \
        f"failing {[t['title'] for t in solved['failing']]}"
    assert isinstance(solved["seconds_to_solve"], (int, float)) and solved["seconds_to_solve"] >= 0, \
        f"expected a number of seconds from first check to solved, got {solved['seconds_to_solve']!r}"
    assert solved["files"] == [{"path": KATA_FILE, "text": solution}], "expected the export to carry the fixed file"

    out = loopkata(env, "progress", "--export", str(tmp_path / "record.json"), "--name", "alice", "--without-files",
                   cwd=root)
    record = read_json(tmp_path / "record.json")["katas"][KATA]
    assert "without your kata files" in out.stdout and record["files"] == [] and record["status"] == "solved", \
        f"expected --without-files to keep the record and leave the files out, got {out.stdout!r}, {record['files']!r}"


def test_a_progress_file_from_before_the_new_fields_loads_and_counts_on(tmp_path, monkeypatch):
    """an older progress.json (no checks, first check or failing tests) still loads, and a check counts on from it"""
    monkeypatch.setenv("LOOPKATA_STATE", str(tmp_path))
    old = {KATA: {"status": "attempted", "last_verdict": "hang", "last_failure": "hang: it is stuck",
                  "checked_at": "2026-11-30 10:00:00", "hints_seen": [0]}}
    write(tmp_path / "progress.json", old)
    kata = catalogue.find(KATA)
    assert progress.load_state() == old, f"expected the old file to load as written, got {progress.load_state()}"
    passed = runner.CheckResult(kata=KATA, impl="x", verdict=runner.PASSED,
                                tests=[runner.TestResult(name="t", title="t", outcome=runner.PASSED)])
    progress.record_check(kata, passed)
    kept = sorted(p.name for p in tmp_path.glob("progress.json.corrupt-*"))
    assert not kept, f"expected the old file to be read, not kept aside as corrupt: {kept}"
    entry = progress.entry(kata)
    assert (entry["checks"], entry["first_check_at"], entry["hints_seen"]) == (2, None, [0]), \
        f"expected 2 checks (the old one and this), the first check's time unknown, hints kept; got " \
        f"{entry['checks']}, {entry['first_check_at']!r}, {entry['hints_seen']}"
    assert export.seconds_to_solve(entry, progress.SOLVED) is None, \
        "expected no time to solve when the first check's time is unknown"


# --- 2. the room ------------------------------------------------------------------------

def test_the_room_shows_a_table_and_saves_a_figure_from_three_exports(tmp_path):
    """three exports (solved, attempted, untouched): a row each, the counts, the median and where the room is stuck"""
    stuck_on = "a second and third warm invocation succeed, like the first"
    write(tmp_path / "exports" / "alice.json", an_export("alice", "solved", 3, seconds=240))
    write(tmp_path / "exports" / "bob.json", an_export("bob", "attempted", 5, failing=[stuck_on]))
    write(tmp_path / "exports" / "carol.json", an_export("carol", "untouched", 0))
    out = loopkata(room_env(), "room", "exports", cwd=tmp_path)  # a folder of exports; the figure's default path
    assert out.returncode == 0, f"expected exit 0, got {out.returncode}:\n{out.stdout}\n{out.stderr}"
    assert not out.stderr.strip(), f"expected nothing on stderr, got:\n{out.stderr}"
    for first, cells in (("learner", ["learner", "01"]), ("alice", ["alice", "✓ 3"]), ("bob", ["bob", "✗ 5"]),
                         ("carol", ["carol", "·"]), ("solved", ["solved", "1/3"]), ("median", ["median", "4m00s"])):
        got = table_row(out.stdout, first)[:2]
        assert got == cells, f"expected the row {first!r} to start {cells}, got {got}"
    assert f"01 {KATA}: 1 learner: {stuck_on}" in out.stdout, \
        f"expected the room to be stuck on {stuck_on!r} (1 learner), got:\n{out.stdout}"
    width, height = png_size(tmp_path / "room.png")
    assert width >= 600 and height >= 600, f"expected a figure of at least 600 x 600 pixels, got {width} x {height}"


def test_the_figure_shows_a_long_test_title_whole_and_every_text_inside_the_figure(tmp_path, monkeypatch):
    """a stuck test with a long title: the figure shows all of it (wrapped), and no label runs off the figure's edge"""
    long_title = ("after the first invocation's loop is closed, a second warm invocation of the handler acquires "
                  "the module-level semaphore on its own loop and returns within the deadline")
    records = room_of(tmp_path, monkeypatch, an_export("bob", "attempted", 2, failing=[long_title, "a short one"]))
    fig = saved_figure(tmp_path, monkeypatch, records)
    labels = stuck_labels(fig)
    assert any(long_title in label for label in labels), \
        f"expected the whole title among the stuck panel's labels:\n{long_title!r}\ngot:\n" + \
        "\n".join(map(repr, labels))
    fig.canvas.draw()  # laid out again at the figure's own size: nothing may rely on the save's cropping
    renderer, edge = fig.canvas.get_renderer(), fig.bbox

    def inside(box) -> bool:  # to a pixel
        return box.x0 >= edge.x0 - 1 and box.x1 <= edge.x1 + 1 and box.y0 >= edge.y0 - 1 and box.y1 <= edge.y1 + 1

    for label in stuck_panel(fig).get_yticklabels():
        box = label.get_window_extent(renderer)
        assert inside(box), (f"expected every label inside the figure ({edge.width:.0f} x {edge.height:.0f} pixels), "
                             f"but {label.get_text()!r} spans x {box.x0:.0f}..{box.x1:.0f}, "
                             f"y {box.y0:.0f}..{box.y1:.0f}")
    drawn = fig.get_tightbbox(renderer).transformed(fig.dpi_scale_trans)
    assert inside(drawn), (f"expected everything drawn inside the figure ({edge.width:.0f} x {edge.height:.0f} "
                           f"pixels), but it spans x {drawn.x0:.0f}..{drawn.x1:.0f}, y {drawn.y0:.0f}..{drawn.y1:.0f}")


SEVEN = ["a warm invocation reuses the semaphore", "the second call returns before its deadline",
         "a third call after a closed loop", "the semaphore is created lazily", "two loops in turn share nothing",
         "a cancelled waiter releases its slot", "the handler's module imports cleanly"]


def test_where_the_room_is_stuck_says_so_when_a_kata_shows_only_its_three_most_failed_tests(tmp_path, monkeypatch):
    """a kata with 7 failing tests: the table and the figure list the same 3 most learners are stuck on, and both say
    they are 3 of 7"""
    records = room_of(tmp_path, monkeypatch,
                      an_export("bob", "attempted", 4, failing=SEVEN),  # all seven
                      an_export("carol", "attempted", 2, failing=SEVEN[:3]),
                      an_export("dan", "attempted", 1, failing=SEVEN[:2]))
    top = SEVEN[:3]  # failed by 3, 3 and 2 learners; the other four by 1
    said = "the 3 tests most learners are stuck on, of 7 failing"
    text = table(records, columns(records))
    assert f"01 {KATA}: {said}" in text, f"expected the table to say {said!r} for 01 {KATA}, got:\n{text}"
    lines = text.splitlines()
    listed = [title for title in SEVEN if any(re.fullmatch(rf"  01 {KATA}: \d+ learners?: {re.escape(title)}", line)
                                              for line in lines)]
    assert listed == top, f"expected the table to list {top}, got {listed}"
    fig = saved_figure(tmp_path, monkeypatch, records)
    drawn = [title for title in SEVEN if any(title in label for label in stuck_labels(fig))]
    assert drawn == top, f"expected the figure to show the table's 3 tests {top}, got {drawn}"
    assert any(said in t for t in figure_texts(fig)), \
        f"expected the figure to say {said!r}, got the texts:\n" + "\n".join(figure_texts(fig))


BROKEN = {
    "cut-short.json": '{"format": "loopkata-progress", "version": 1, "learner": "x"',
    "a-list.json": "[1, 2]",
    "odd-status.json": json.dumps(an_export("dan", "finished", 1)),
    "escapes.json": json.dumps(an_export("eve", "solved", 1, files={"katas/../../evil.py": "print('hi')"})),
    "not-utf8.json": b"\xff\xfe{",
}


def test_each_malformed_export_is_one_line_naming_it_and_the_others_still_show(tmp_path):
    """unreadable or malformed exports: one line each, naming the file, never a traceback"""
    write(tmp_path / "alice.json", an_export("alice", "solved", 2, seconds=60))
    for name, text in BROKEN.items():
        write(tmp_path / name, text)
    out = loopkata(room_env(), "room", *sorted(BROKEN), "alice.json", "missing.json", "--figure", "r.png", cwd=tmp_path)
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    assert "Traceback" not in out.stderr, f"expected no traceback, got:\n{out.stderr}"
    for name in [*BROKEN, "missing.json"]:
        named = [line for line in lines if name in line]
        assert len(named) == 1, f"expected one line naming {name}, got {len(named)} in:\n{out.stderr}"
    assert len(lines) == len(BROKEN) + 1, f"expected {len(BROKEN) + 1} lines on stderr, got {len(lines)}:\n{out.stderr}"
    assert "outside katas/" in next(line for line in lines if "escapes.json" in line), \
        f"expected a file path leaving katas/ to be refused, got:\n{out.stderr}"
    assert table_row(out.stdout, "alice")[:2] == ["alice", "✓ 2"], f"expected alice's row still shown:\n{out.stdout}"
    assert out.returncode == 1, f"expected exit 1 when an export was skipped, got {out.returncode}"


# --- 3. re-grading ----------------------------------------------------------------------

def test_regrade_marks_a_forged_solved_claim_and_confirms_an_honest_one(tmp_path):
    """--regrade: "solved" with the starter's file is marked; "solved" with a real fix is not"""
    starter = (ROOT / KATA_FILE).read_text(encoding="utf-8")
    solution = (ROOT / "solutions" / "01_bound_semaphore.py").read_text(encoding="utf-8")
    write(tmp_path / "alice.json", an_export("alice", "solved", 2, seconds=90, files={KATA_FILE: solution}))
    write(tmp_path / "mallory.json", an_export("mallory", "solved", 1, seconds=5, files={KATA_FILE: starter}))
    out = loopkata(room_env(), "room", "--regrade", "alice.json", "mallory.json", "--figure", "r.png", cwd=tmp_path)
    assert out.returncode == 1, f"expected exit 1 when a claim differs from the re-grade, got {out.returncode}:\n" \
                                f"{out.stdout}\n{out.stderr}"
    forged = re.search(r"mallory, 01 bound-semaphore: claimed solved, re-grade fails (\d+) of (\d+)", out.stdout)
    assert forged and int(forged.group(1)) > 0, \
        f"expected mallory's claim marked as failing the re-grade, got:\n{out.stdout}"
    assert "alice, 01 bound-semaphore: claimed solved, re-grade passes all" in out.stdout, \
        f"expected alice's fix to pass the re-grade, got:\n{out.stdout}"
    assert table_row(out.stdout, "mallory")[1] == "✓ 1!", \
        f"expected mallory's cell marked '!', got {table_row(out.stdout, 'mallory')}"
    assert table_row(out.stdout, "alice")[1] == "✓ 2", f"expected alice's cell unmarked, got {table_row(out.stdout, 'alice')}"
    contradicted = [line for line in out.stdout.splitlines() if line.strip().startswith("! ")]
    assert len(contradicted) == 1 and "mallory" in contradicted[0], \
        f"expected exactly mallory's claim listed as contradicted, got {contradicted}"


def test_regrade_outside_a_loop_katas_folder_refuses_in_one_line_before_anything_else(tmp_path):
    """--regrade run in a folder with no catalogue (and no LOOPKATA_ROOT): one line on stderr, exit 2, no re-grading"""
    assert not any((folder / "katas" / "catalogue.toml").is_file() for folder in (tmp_path, *tmp_path.parents)), \
        f"this test needs a temporary folder outside any Loop Katas folder, but {tmp_path} is inside one"
    write(tmp_path / "alice.json", an_export("alice", "solved", 2, seconds=60))
    env = {k: v for k, v in os.environ.items() if k != "LOOPKATA_ROOT"}
    out = loopkata(env, "room", "--regrade", "alice.json", "--figure", "r.png", cwd=tmp_path)
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    assert "re-grading" not in out.stdout.lower(), \
        f"expected no word of re-grading before the refusal, got:\n{out.stdout}"
    assert not out.stdout.strip(), f"expected nothing on stdout (no table, no re-grade), got:\n{out.stdout}"
    assert len(lines) == 1 and "Traceback" not in out.stderr, f"expected one line on stderr, got:\n{out.stderr}"
    assert "--regrade" in lines[0] and "katas/catalogue.toml" in lines[0], \
        f"expected the line to say --regrade needs a folder with katas/catalogue.toml, got {lines[0]!r}"
    assert out.returncode == 2, f"expected exit 2 (the tool cannot do what was asked), got {out.returncode}"
    assert not (tmp_path / "r.png").exists(), "expected no figure written"


# --- 4. what a re-grade counts ----------------------------------------------------------
# These re-grades are fixed results put in place of the sandboxed check, so each test takes
# well under a second and says exactly what the re-grade found.

def a_check(verdict: str, failing: int = 0, total: int = 5, problem: str = "") -> runner.CheckResult:
    """A check's report: `total` hidden tests of which `failing` failed."""
    tests = [runner.TestResult(name=f"test_{n}", title=f"hidden test {n}",
                               outcome=runner.FAILED if n < failing else runner.PASSED) for n in range(total)]
    return runner.CheckResult(kata=KATA, impl=KATA_FILE, verdict=verdict, tests=tests, problem=problem)


# Each learner claims solved; what the re-grade of their file finds. bob's grading broke for a reason of the
# machine (no report at all); carol's check reported no verdict (her code may have crashed the grader).
A_ROOM = {
    "alice": (90, a_check(runner.PASSED)),
    "bob": (60, "the check gave no report (exit status -9; nothing on stderr)"),
    "carol": (120, a_check(runner.ERROR, problem="INTERNALERROR RuntimeError: the grader's plugin crashed")),
    "mallory": (5, a_check(runner.FAILED, failing=2)),
}


def regraded_room(tmp_path, monkeypatch, capsys, room=A_ROOM):
    """`loopkata room --regrade` run here on one export per learner of `room` (all claiming solved), each
    re-grade giving its fixed result; the exit status, stdout, stderr and the figure as it was saved."""
    from matplotlib.figure import Figure

    from loopkata import cli
    from loopkata.room import regrade

    monkeypatch.setenv("LOOPKATA_ROOT", str(ROOT))
    paths = []
    for learner, (seconds, _) in room.items():
        files = {KATA_FILE: f"# {learner}'s fix\n"}
        paths.append(write(tmp_path / "exports" / f"{learner}.json",
                           an_export(learner, "solved", 2, seconds=seconds, files=files)))

    def graded(kata, files, *args, **kwargs):
        learner = files[KATA_FILE].decode().split("'")[0].removeprefix("# ")
        return room[learner][1], None

    monkeypatch.setattr(regrade, "grade_in_jail", graded)
    saved, real_savefig = [], Figure.savefig

    def keep(fig, *args, **kwargs):
        saved.append(fig)
        return real_savefig(fig, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", keep)
    status = cli.main(["room", "--regrade", *map(str, paths), "--figure", str(tmp_path / "room.png")])
    out = capsys.readouterr()
    assert len(saved) == 1, f"expected the figure saved once, got {len(saved)} saves:\n{out.out}\n{out.err}"
    return status, out.out, out.err, saved[0]


def test_a_regrade_that_gave_no_verdict_is_reported_as_such_never_as_a_contradicted_claim(tmp_path, monkeypatch,
                                                                                          capsys):
    """a grading that broke (no report, or a check that could not grade) is counted apart; only mallory's failing
    file contradicts her claim, and the room exits 1 because two learners could not be graded"""
    status, out, _, _ = regraded_room(tmp_path, monkeypatch, capsys)
    summary = next((line for line in out.splitlines() if " re-graded, " in line), "")
    assert re.search(r"\b2 gave no verdict\b", summary) and "1 claim differs" in summary, \
        f"expected the summary to count 2 re-grades that gave no verdict and 1 claim differing, got {summary!r}"
    contradicted = [line.strip() for line in out.splitlines() if line.strip().startswith("! ")]
    assert len(contradicted) == 1 and "mallory" in contradicted[0], \
        f"expected only mallory's claim listed as contradicted, got {contradicted}"
    for learner in ("bob", "carol"):
        said = [line for line in out.splitlines() if line.startswith(f"  {learner}, ")]
        assert said and "could not grade it" in said[0] and "differs" not in said[0], \
            f"expected {learner}'s re-grade said as 'could not grade it', not as differing, got {said}"
    listed = out[out.find("gave no verdict:"):] if "gave no verdict:" in out else ""
    assert "bob" in listed and "carol" in listed and "mallory" not in listed, \
        f"expected a list of the re-grades that gave no verdict naming bob and carol, got:\n{out}"
    assert status == 1, f"expected exit 1: the room had re-grades that gave no verdict, got {status}"


def test_after_a_regrade_the_table_counts_as_solved_only_the_claims_it_confirmed(tmp_path, monkeypatch, capsys):
    """four solved claims: one confirmed, two without a verdict (claimed, not verified), one contradicted; the
    solved row says 1/4, the cells say which is which, and the median is of the confirmed one alone"""
    _, out, _, _ = regraded_room(tmp_path, monkeypatch, capsys)
    cells = {learner: table_row(out, learner)[1] for learner in A_ROOM}
    expected = {"alice": "✓ 2", "bob": "✓ 2~", "carol": "✓ 2~", "mallory": "✓ 2!"}
    assert cells == expected, f"expected the cells {expected} (~ not verified, ! contradicted), got {cells}"
    assert table_row(out, "solved")[1] == "1/4", \
        f"expected the solved row to count alice's confirmed claim only (1/4), got {table_row(out, 'solved')}"
    assert table_row(out, "not verified")[1] == "2/4", \
        f"expected a row counting the 2 solved claims the re-grade could not check, got:\n{out}"
    assert table_row(out, "median")[1] == "1m30s", \
        f"expected the median time of alice's confirmed solve alone (1m30s), got {table_row(out, 'median')}"
    legend = next((line for line in out.splitlines() if line.startswith("4 learners:")), "")
    assert "~" in legend and "not verified" in legend and "contradicts" in legend, \
        f"expected the table's legend to say what ~ and ! mean, got {legend!r}"


def test_after_a_regrade_the_figure_draws_confirmed_unverified_and_contradicted_claims_apart(tmp_path, monkeypatch,
                                                                                             capsys):
    """the figure's bar for the kata: 1 solved (confirmed), 2 claimed but not verified, 1 contradicted, each in its own
    colour with a legend that says so; its title says it follows the re-grade, the median counts alice only"""
    from matplotlib.axes import Axes
    from matplotlib.legend import Legend

    fig = regraded_room(tmp_path, monkeypatch, capsys)[3]
    top = [ax for ax in fig.findobj(Axes) if ax.get_title().startswith("Learners per kata")]
    assert len(top) == 1, f"expected one panel titled 'Learners per kata', got {[a.get_title() for a in top]}"
    ax = top[0]
    assert "after the re-grade" in ax.get_title(), f"expected the title to say it follows the re-grade, got " \
                                                   f"{ax.get_title()!r}"
    bars = {c.get_label(): c.patches[0].get_height() for c in ax.containers}
    drawn = {meaning: [n for label, n in bars.items() if meaning in label] for meaning in
             ("confirmed", "not verified", "contradicted")}
    assert drawn == {"confirmed": [1], "not verified": [2], "contradicted": [1]}, \
        f"expected bars of 1 confirmed, 2 not verified and 1 contradicted, each once, got the bars {bars}"
    colours = {c.get_label(): c.patches[0].get_facecolor() for c in ax.containers}
    assert len(set(colours.values())) == len(colours), f"expected each status in a colour of its own, got {colours}"
    legends = [sorted(t.get_text() for t in legend.get_texts()) for legend in fig.findobj(Legend)]
    assert sorted(bars) in legends, f"expected a legend naming every bar {sorted(bars)}, got the legends {legends}"
    assert any(t.startswith("1m30s") and "(n=1)" in t for t in figure_texts(fig)), \
        "expected the median of alice's confirmed solve alone, '1m30s (n=1)', got the texts:\n" + \
        "\n".join(figure_texts(fig))


def test_a_solved_claim_this_machine_cannot_regrade_is_claimed_not_verified_and_not_a_problem(tmp_path, monkeypatch,
                                                                                              capsys):
    """a kata this machine cannot grade ("not possible on this machine"): the claim is neither counted solved nor
    contradicted, and, being no fault of the grading, the room still exits 0"""
    room = {"alice": (90, a_check(runner.PASSED)),
            "dan": (60, a_check(runner.NOT_HERE, problem="this machine has no cgroup file system\nmore"))}
    status, out, err, _ = regraded_room(tmp_path, monkeypatch, capsys, room)
    cells = {learner: table_row(out, learner)[1] for learner in room}
    assert cells == {"alice": "✓ 2", "dan": "✓ 2~"}, f"expected dan's claim shown as not verified (~), got {cells}"
    assert (table_row(out, "solved")[1], table_row(out, "not verified")[1]) == ("1/2", "1/2"), \
        f"expected 1/2 solved and 1/2 not verified, got:\n{out}"
    assert status == 0, f"expected exit 0 (nothing went wrong, this machine lacks a mechanism), got {status}:\n{err}"
