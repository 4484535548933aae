"""Every kata in the catalogue, proven three ways by its own hidden tests.

- the starter fails, and fails with every symptom the catalogue states (not an
  ImportError, not a typo);
- the reference solution passes;
- every decoy (a plausible wrong fix) fails (its check stops at the first
  failing test, which is all that proves), and every variant (another correct
  fix) passes, so the tests grade behaviour rather than the shape of our fix.

A decoy that is wrong only on some Pythons (it relies on how one version's
asyncio behaves) says so in its header, `wrong_on_python: >=3.12` (a version
specifier): there it must fail, and on every other Python it must pass, so the
suite stays honest on each version it runs on.

Each decoy and variant is a difference from the reference fix or the starter
(loopkata.model.difference): the grader builds it from its base for every check.
"""
import platform

import pytest
from packaging.specifiers import InvalidSpecifier, SpecifierSet

from loopkata.grading import runner
from loopkata.model import catalogue, difference
from loopkata.grading.report import render_text
from loopkata.services import containers

KATAS = catalogue.load()
PYTHON = platform.python_version()
PYTHON_X_Y = ".".join(PYTHON.split(".")[:2])


def wrong_on_python(decoy) -> str | None:
    """The version specifier of the Pythons a decoy is wrong on, or None: wrong on every one."""
    spec = difference.read(decoy).wrong_on_python
    if spec is not None:
        try:
            SpecifierSet(spec)
        except InvalidSpecifier:
            pytest.fail(f'{decoy}: wrong_on_python: {spec} is not a version specifier like ">=3.12"')
    return spec


def wrong_here(decoy) -> bool:
    spec = wrong_on_python(decoy)
    return spec is None or SpecifierSet(spec).contains(PYTHON)


def _cases():
    for k in KATAS:
        yield pytest.param(k, "starter", k.kata_path, id=f"{k.id}-starter-fails-with-its-symptom")
        yield pytest.param(k, "solution", k.solution_path, id=f"{k.id}-solution-passes")
        for d in k.decoys:
            if wrong_here(d):
                yield pytest.param(k, "decoy", d, id=f"{k.id}-decoy-{d.stem}-fails")
            else:
                yield pytest.param(k, "decoy right here", d, id=f"{k.id}-decoy-{d.stem}-passes-on-python-{PYTHON_X_Y}")
        for v in k.variants:
            yield pytest.param(k, "variant", v, id=f"{k.id}-variant-{v.stem}-passes")


def too_busy(result) -> bool:
    """Whether every test that did not pass said the machine was too busy to judge it (kata 13's drills, when the
    workers and the drill waited for a CPU past what a verdict can bear): no verdict on the fix, either way."""
    failures = [t for t in result.tests if t.outcome not in ("passed", "not run")]
    return bool(failures) and all(t.outcome == runner.COULD_NOT_RUN and "too busy to judge" in (t.message or "")
                                  for t in failures)


@pytest.mark.parametrize("kata, role, impl", list(_cases()))
def test_kata_is_proven(kata, role, impl):
    # A decoy is proven wrong by one failing test: its check stops there. The starter runs every
    # test (each stated symptom must show); a fix must pass them all.
    result = runner.check(kata, impl, until_failed=role == "decoy")
    if too_busy(result):
        result = runner.check(kata, impl, until_failed=role == "decoy")  # once more: the machine judged nothing
    shown = render_text(result, kata)
    if too_busy(result):
        pytest.skip(f"this machine was too busy to judge the {role} {impl.name}:\n{shown}")
    if role in ("solution", "variant"):
        assert result.passed, f"expected the {role} {impl.name} to pass every hidden test, but:\n{shown}"
        return
    if role == "decoy right here":
        assert result.passed, (
            f"expected the decoy {impl.name}, wrong only on Python {wrong_on_python(impl)}, to pass every hidden "
            f"test on Python {PYTHON} (or its wrong_on_python line is wrong), but:\n{shown}"
        )
        return
    assert result.verdict in (runner.FAILED, runner.HANG), (
        f"expected the {role} {impl.name} to fail its tests (not to pass, not to crash on import), got:\n{shown}"
    )
    if role == "starter":
        for symptom in kata.symptoms:
            assert any(symptom.seen_in(t.__dict__) for t in result.tests), (
                f"expected the starter to show its stated symptom: {symptom.verdict} "
                f"{symptom.pattern or ''} ({symptom.explain}), got:\n{shown}"
            )


@pytest.mark.parametrize("kata", KATAS, ids=[k.id for k in KATAS])
def test_kata_has_decoys_and_variants(kata):
    assert len(kata.decoys) >= 2, f"{kata.id}: expected at least 2 decoys in tests/decoys/{kata.id}/"
    assert len(kata.variants) >= 1, f"{kata.id}: expected at least 1 variant in tests/variants/{kata.id}/"
    assert kata.symptoms, f"{kata.id}: the catalogue states no symptom for the starter"
    for path, said in [(d, "Decoy:") for d in kata.decoys] + [(v, "Variant:") for v in kata.variants]:
        sentence = difference.read(path).sentence
        assert sentence.startswith(said) and len(sentence) > len(said) + 10, (
            f"{path}: expected its first line to be a sentence starting '{said}' that says what it changes and why "
            f"that is {'wrong' if said == 'Decoy:' else 'still right'}, found {sentence!r}")


def _fallback_cases():
    for k in KATAS:
        if k.mechanisms:
            yield pytest.param(k, "starter", k.kata_path, id=f"{k.id}-starter-fails-on-the-fallback")
            yield pytest.param(k, "solution", k.solution_path, id=f"{k.id}-solution-could-not-run-here-on-the-fallback")


@pytest.mark.parametrize("kata, role, impl", list(_fallback_cases()))
def test_kata_on_the_fallback(kata, role, impl, monkeypatch):
    """Where the kernel gives no container mechanism, a check runs the fallback: it may still fail a
    wrong fix, and it never says "solved" (LOOPKATA_CONTAINER=fallback forces that path here)."""
    monkeypatch.setenv(containers.FORCE, "fallback")
    result = runner.check(kata, impl, until_failed=role == "starter")
    shown = render_text(result, kata)
    if role == "starter":
        assert result.verdict in (runner.FAILED, runner.HANG), (
            f"expected the starter to fail on the fallback too, got:\n{shown}")
        return
    assert result.verdict == runner.NOT_HERE, (
        f"expected the reference fix on the fallback to be 'could not run here' (never solved), got:\n{shown}")
    assert "LOOPKATA_CONTAINER=fallback" in result.problem, (
        f"expected the verdict to say why it could not run (the forced fallback), got:\n{shown}")
