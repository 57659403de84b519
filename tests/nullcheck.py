"""The null tests' one threshold and their blindness check (imported by the tests/test_null_*.py files).

A null test simulates results without the claimed effect, in the real run's shapes, and judges them through the gate
many times (`verdicts.null_rates`). It passes where the claim says `differ` (or, for a claimed direction, `agree`)
no more often than the gate's nominal level, 2.5 % for a one-sided claim, plus the tolerance of its draws
(`verdicts.null_limit`: z = 2.326, so a gate at exactly its level fails one test in a hundred). A null test whose
parts could say `differ` in few of its draws cannot see the gate's rule (take the testability condition out of the
rule, and it still passes): it must be testable in at least `MIN_TESTABLE` of its draws, or be declared blind
(`check_blind`), where the claim cannot say `differ` by construction and the test asserts exactly that.

`COSINE_PITFALLS_BREAK_GATE=holm|testability|controls` runs these tests against a broken copy of the rule
(tests/conftest.py), to show that each break makes some of them fail (tools/break_gate.py)."""
from cosine_pitfalls.repro.verdicts import null_limit

MIN_TESTABLE = 0.05   # the share of draws in which a part could say differ: below it (50 of 1,000), a null test is blind


def check_null(name: str, r: dict, draws: int, agree: bool = False):
    "Print a null test's rates; fail where it is blind or where `differ` (and with `agree`: `agree`) is too frequent."
    lim = null_limit(draws)
    print(f"{name}: differ {r['differ']:.3f}, agree {r['agree']:.3f}, inconclusive {r['inconclusive']:.3f}, "
          f"fragile {r['fragile']:.3f}; testable in {r['testable']:.2f} of {draws} draws (limit {lim:.4f})")
    assert r['testable'] >= MIN_TESTABLE, (f"{name}: a part could say differ in {r['testable']:.0%} of the draws "
                                           f"(< {MIN_TESTABLE:.0%}): this test cannot see the gate's rule", r)
    assert r['differ'] <= lim, (name, r)
    if agree: assert r['agree'] <= lim, (name, r)


def check_blind(name: str, r: dict, why: str):
    "A claim that cannot say differ by construction (`why`): no draw is testable, none says differ."
    print(f"{name}: blind by construction ({why}); differ {r['differ']:.3f}, agree {r['agree']:.3f}")
    assert r['testable'] == 0 and r['differ'] == 0, (name, why, r)
