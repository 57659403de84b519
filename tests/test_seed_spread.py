"""`benchmarks/seed_spread.py`, which wrote the seed spread the gpu profile's power statements assume
(`repro.power.SEED_SPREAD`): on the shared smoke reproduction, every paired accuracy comparison of sections 4-5 the
gate printed is read, none of another kind, and the spread is se·√n of what was printed."""
import json, math, runpy
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope='module')
def seed_spread(): return runpy.run_path(str(ROOT/'benchmarks'/'seed_spread.py'))


def test_reads_the_printed_comparisons(smoke, seed_spread, tmp_path):
    out = tmp_path/'spread.json'
    seed_spread['main']([str(smoke[0]), '--out', str(out)])
    rec = json.loads(out.read_text())
    assert rec['profile'] == 'smoke' and rec['parts'] == len(rec['rows']) > 0
    for r in rec['rows']:
        assert '‖' not in r['part'] and 'chance band' not in r['part'], r
        assert math.isclose(r['sd'], r['se'] * math.sqrt(r['n'])), r
        s = json.loads((smoke[0]/'results'/f"{r['id']}.json").read_text())
        text = next(t for _, t in s['parts'] if r['part'] in t)           # the part, as the gate printed it
        scale = 0.01 if r['id'].startswith('margins.') else 1.0
        assert any(f"± {r['se'] / scale:.{d}f} (p = " in text for d in (2, 3, 4)), (r, text)   # as printed
    assert rec['min_sd'] <= rec['median_sd'] <= rec['max_sd']


def test_a_folder_without_training_results_is_refused(seed_spread, tmp_path):
    (tmp_path/'results').mkdir()
    with pytest.raises(SystemExit, match='no paired accuracy comparison'):
        seed_spread['main']([str(tmp_path), '--out', str(tmp_path/'x.json')])
    assert not (tmp_path/'x.json').exists()
