"""The null tests against the gate's rule and three broken copies of it: which tests each break makes fail.

    python tools/break_gate.py [--out outputs/checks/null_breaks.md] [-n 2]

Runs tests/test_null_*.py four times: with the rule intact (every test must pass), then with
COSINE_PITFALLS_BREAK_GATE=holm (every part at the claim's level), =testability (any part may say differ, without
the paper's effect, a detectable effect below it, headroom above it, or a margin of the paper's) and =controls (a
control of ours decides like a part); see tests/conftest.py. Prints a table, one row per test, and how many tests
each break fails; a break that no test catches means the null tests cannot see that part of the rule."""
import argparse, os, subprocess, sys, tempfile, xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BREAKS = ('intact', 'holm', 'testability', 'controls')


def outcomes(brk: str, workers: int) -> dict:
    "Each null test's outcome ('pass' / 'FAIL') under one break of the rule."
    with tempfile.TemporaryDirectory() as d:
        xml = Path(d)/'junit.xml'
        env = dict(os.environ, COSINE_PITFALLS_BREAK_GATE='' if brk == 'intact' else brk)
        files = sorted(str(p.relative_to(ROOT)) for p in (ROOT/'tests').glob('test_null_*.py'))
        subprocess.run([sys.executable, '-m', 'pytest', '-q', '-p', 'no:cacheprovider', '-n', str(workers),
                        f'--junitxml={xml}', *files], cwd=ROOT, env=env, stdout=subprocess.DEVNULL)
        out = {}
        for case in ET.parse(xml).getroot().iter('testcase'):
            name = f"{case.get('classname').rsplit('.', 1)[-1]}::{case.get('name')}"
            bad = case.find('failure') is not None or case.find('error') is not None
            out[name] = 'skip' if case.find('skipped') is not None else 'FAIL' if bad else 'pass'
        return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--out', default='outputs/checks/null_breaks.md')
    ap.add_argument('-n', type=int, default=2, help='pytest-xdist workers')
    a = ap.parse_args()
    res = {b: outcomes(b, a.n) for b in BREAKS}
    names = sorted(res['intact'])
    lines = ['# The null tests against broken copies of the gate', '',
             '| test | ' + ' | '.join(BREAKS) + ' |', '| --- |' + ' --- |' * len(BREAKS)]
    lines += [f'| `{n}` | ' + ' | '.join(res[b].get(n, '—') for b in BREAKS) + ' |' for n in names]
    lines += ['', ', '.join(f"{b}: {sum(v == 'FAIL' for v in res[b].values())} of {len(res[b])} fail"
                            for b in BREAKS)]
    text = '\n'.join(lines) + '\n'
    print(text)
    out = ROOT/a.out; out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix('.tmp'); tmp.write_text(text); os.replace(tmp, out)
    intact_fail = [n for n in names if res['intact'][n] == 'FAIL']
    uncaught = [b for b in BREAKS[1:] if not any(v == 'FAIL' for v in res[b].values())]
    if intact_fail: print('FAILED with the rule intact:', intact_fail)
    if uncaught: print('no null test catches:', uncaught)
    return 1 if intact_fail or uncaught else 0


if __name__ == '__main__':
    sys.exit(main())
