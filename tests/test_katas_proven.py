"""Every kata in the catalogue, proven three ways by its own hidden tests.

- the starter fails, and fails with every symptom the catalogue states (not an
  ImportError, not a typo);
- the reference solution passes;
- every decoy (a plausible wrong fix) fails, and every variant (another correct
  fix) passes, so the tests grade behaviour rather than the shape of our fix.
"""
import pytest

from loopkata import catalogue, runner
from loopkata.report import render_text

KATAS = catalogue.load()


def _cases():
    for k in KATAS:
        yield pytest.param(k, "starter", k.kata_path, id=f"{k.id}-starter-fails-with-its-symptom")
        yield pytest.param(k, "solution", k.solution_path, id=f"{k.id}-solution-passes")
        for d in k.decoys:
            yield pytest.param(k, "decoy", d, id=f"{k.id}-decoy-{d.stem}-fails")
        for v in k.variants:
            yield pytest.param(k, "variant", v, id=f"{k.id}-variant-{v.stem}-passes")


@pytest.mark.parametrize("kata, role, impl", list(_cases()))
def test_kata_is_proven(kata, role, impl):
    result = runner.check(kata, impl)
    shown = render_text(result, kata)
    if role in ("solution", "variant"):
        assert result.passed, f"expected the {role} {impl.name} to pass every hidden test, but:\n{shown}"
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
    for decoy in kata.decoys:
        files = sorted(decoy.rglob("*.py")) if decoy.is_dir() else [decoy]
        assert any(f.read_text().lstrip().startswith(('"""', "'''")) for f in files), (
            f"{decoy}: a decoy starts with a docstring saying why it is wrong"
        )
