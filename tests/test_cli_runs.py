"""The installed `cosine-pitfalls` CLI running notebooks: failures, interruption, sections 4-5 (kills: test_kills.py).
(Split from test_cli.py so that `make test`'s parallel workers, a file each, get similar shares.)"""
import json, os, re, shutil, signal, subprocess, time
from pathlib import Path

import pytest

from conftest import CLI, NBS, read_json, run_cli, run_main

from cosine_pitfalls.repro.verdicts import VERDICTS
from cosine_pitfalls.repro.paper import NOTEBOOKS, notebook_ids, notebook_of, section_ids

SECTION1 = section_ids(1)


def _broken_copy(tmp_path, file):
    "A copy of nbs/ where the notebook `file` raises right after its parameters cell."
    nbs = tmp_path/'nbs'; shutil.copytree(NBS, nbs)
    p = nbs/NOTEBOOKS[file].path; nb = json.loads(p.read_text())
    k = next(j for j, c in enumerate(nb['cells']) if 'parameters' in c.get('metadata', {}).get('tags', []))
    nb['cells'].insert(k + 1, dict(cell_type='code', metadata={}, outputs=[], execution_count=None, id='broken',
                                   source="raise RuntimeError('deliberate failure planted by the test')"))
    p.write_text(json.dumps(nb))
    return nbs


def test_failing_notebook_is_recorded_and_batch_goes_on(tmp_path):
    """A notebook that fails is recorded and kept, the other one of the batch registers its ID. Both come from a
    folder given with --nbs, so neither is signed as trusted (issue 19.6: only the package's own notebooks are), and
    the runner's clean-up leaves a live writer's temporary alone."""
    other = next((f for f in NOTEBOOKS if f != notebook_of('clop.thm1').file and (NBS/NOTEBOOKS[f].path).exists()), None)
    if other is None: pytest.skip('needs a second section notebook')
    nbs, out = _broken_copy(tmp_path, other), tmp_path/'out'
    bad = notebook_ids(other)[0]
    (out/'results').mkdir(parents=True)
    live = out/'results'/f'.clop.fig6.{os.getpid()}.ab12cd34.tmp.nc'   # a live writer's temporary (this process)
    live.write_text('half')
    env = dict(os.environ, JUPYTER_DATA_DIR=str(tmp_path/'jupyter'))    # a notary of its own
    r = run_cli('reproduce', '--profile', 'smoke', '--only', 'clop.thm1', bad, '--nbs', nbs, '--out', out, '--quiet',
                env=env)
    assert r.returncode == 1
    assert live.exists(), "a run's clean-up deleted another process's temporary file"
    m = read_json(out/'manifest.json')
    assert [x.get('trusted') for x in m['runs'] if x['status'] == 'ok'] == [False]
    db = tmp_path/'jupyter'/'nbsignatures.db'
    if db.exists():
        import sqlite3
        with sqlite3.connect(db) as c: assert c.execute('select count(*) from nbsignatures').fetchone()[0] == 0
    assert 'deliberate failure planted by the test' in r.stderr
    m = read_json(out/'manifest.json')
    assert m['results']['clop.thm1']['status'] == 'ok' and (out/'results'/'clop.thm1.nc').exists()
    err = m['results'][bad]['error']
    assert m['results'][bad]['status'] == 'failed' and err['ename'] == 'RuntimeError' and err['cell'] is not None
    kept = out/'runs'/f"{Path(other).stem}.smoke.failed.ipynb"          # never over a finished one (issue 19)
    assert 'deliberate failure planted by the test' in kept.read_text()
    row = (out/'report.md').read_text().split(f'| `{bad}` |')[1].split('\n')[0]
    assert '| failed |' in row and 'RuntimeError' in row


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason='side by side needs two cores')
@pytest.mark.parametrize('how', ['SIGTERM', 'SIGINT to the group'])
def test_side_by_side_notebooks_are_interrupted_together(tmp_path, how):
    """Sections 1 and 3 at smoke run side by side (a pinned core each); SIGTERM to the runner alone, or Ctrl-C to
    the whole group (each notebook's process gets it, then the runner's SIGTERM too), interrupts both: each recorded
    as interrupted, its unfinished notebook kept under its own name, nothing partial left, no traceback."""
    out = tmp_path/'out'
    p = subprocess.Popen([str(CLI), 'reproduce', '--profile', 'smoke', '--section', '1', '3', '--out', str(out),
                          '--quiet'], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        t0 = time.time()
        while time.time() - t0 < 300 and len(list((out/'runs').glob('.*running*'))) < 2 and p.poll() is None:
            time.sleep(0.05)
        assert p.poll() is None and len(list((out/'runs').glob('.*running*'))) == 2, 'the two never ran together'
        time.sleep(3)                                                           # a few cells in
        if how == 'SIGTERM': p.send_signal(signal.SIGTERM)
        else: os.killpg(p.pid, signal.SIGINT)
        _, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None: os.killpg(p.pid, signal.SIGKILL); p.wait()
    assert p.returncode == 130 and 'Traceback' not in err, err
    m = read_json(out/'manifest.json')
    test = {r['notebook']: r for r in m['runs']}
    assert sorted(test) == ['01_gradients.ipynb', '03_clop_synthetic.ipynb'], m['runs']
    for nb, r in test.items():
        assert r['status'] == 'interrupted', r
        kept = out/'runs'/f"{nb[:-6]}.smoke.interrupted.ipynb"
        assert kept.exists() and f'runs/{kept.name}' in err, err
        json.loads(kept.read_text())
    for i in [i for r in m['runs'] for i in r['ids']]:   # registered before the signal: ok; the others interrupted
        assert m['results'][i]['status'] == ('ok' if (out/'results'/f'{i}.json').exists() else 'interrupted')
    assert [f for f in out.rglob('*') if '.tmp' in f.name or '.running' in f.name] == []


def test_section4_trains_through_the_runner(smoke, smoke_copy):
    """Section 4 in the shared smoke reproduction (`conftest.smoke`: the whole notebook through the CLI): every ID
    registered with a verdict, the training runs kept under training/, anchored on the page; a rerun of two IDs is
    skipped, no kernel started (`run_main` fails if one is)."""
    out, _ = smoke
    ids = notebook_ids('04_directclr.ipynb')
    for i in ids:
        s = read_json(out/'results'/f'{i}.json')
        assert s['verdict'] in VERDICTS and 'digits' in s['ours'] and 'CIFAR' not in s['ours'], i
    runs = list((out/'training'/'04_directclr'/'runs').iterdir())
    cfgs = [read_json(d/'config.json') for d in runs]
    assert len(runs) >= 2 * 2 and all((d/'run.nc').exists() for d in runs)
    assert {c['method'] for c in cfgs} == {'directclr', 'simclr'} and {c['projector'] for c in cfgs} >= {'none'}
    page = (out/'notebooks'/'04_directclr.smoke.html').read_text()
    assert all(f'id="{i}"' in page for i in ids)
    n = len(read_json(smoke_copy/'manifest.json')['runs'])
    r2 = run_main('reproduce', '--profile', 'smoke', '--only', 'directclr.subvector', 'directclr.fig12', '--out',
                  smoke_copy, '--quiet')
    assert r2.returncode == 0 and len(read_json(smoke_copy/'manifest.json')['runs']) == n, r2.stderr


@pytest.mark.parametrize('nb', [f[:-6] for f in NOTEBOOKS if f[:2] in ('01', '02', '03', '04', '05')])
def test_the_verdicts_stand_under_the_claims(smoke, nb):
    """An executed section notebook (what JupyterLab opens) shows the table of its verdicts right under the claims:
    the last cell's `GLANCE.update` filled the placeholder at the top with one row per result ID and its verdict."""
    out, _ = smoke
    cells = read_json(out/'runs'/f'{nb}.smoke.ipynb')['cells']
    heads = [''.join(c['source']).split('\n')[0] for c in cells[1:3]]
    assert heads == ['## The claims', '## Results at a glance'], heads
    (o,) = cells[3]['outputs']
    text = ''.join(o['data']['text/plain'])
    assert 'text/markdown' not in o['data'], o['data']     # the placeholder (markdown) replaced by the table
    for i in notebook_ids(f'{nb}.ipynb'):
        s = read_json(out/'results'/f'{i}.json')
        label = s['verdict'] + (' (fragile)' if s['fragile'] else '')
        assert re.search(rf'^{re.escape(i)}\s+{re.escape(label)}\s', text, re.M), (i, label, text[:800])


def test_section5_prototypes_margins_through_the_runner(smoke, smoke_copy):
    """Section 5 part 2 (CLOP, margins) in the shared smoke reproduction: every ID registered with a verdict and what
    our runs detect beside the paper's; an ID not run below paper scale is `inconclusive`; CLOP's similarities on
    ℓ2-normalized z; a rerun of three IDs starts no kernel and trains nothing."""
    out, _ = smoke
    ids = notebook_ids('05b_prototypes_margins.ipynb')
    run = next(r for r in read_json(out/'manifest.json')['runs'] if r['notebook'] == '05b_prototypes_margins.ipynb')
    assert sorted(run['registered']) == sorted(ids)
    for i in ids:
        s = read_json(out/'results'/f'{i}.json')
        assert s['verdict'] in VERDICTS and s['ours'] and 'digits' in s['ours'] + str(s['params']), i
        assert s['detect'] and ("the paper's" in s['detect']), i         # what our runs detect, beside the paper's
    assert read_json(out/'results'/'margins.table4.json')['verdict'] == 'inconclusive'   # not run below paper scale
    t2 = read_json(out/'results'/'clop.table2.json')       # trained, every similarity on ℓ2-normalized z
    assert t2['verdict'] in VERDICTS and 'ℓ2-normalized z' in t2['ours'], t2['ours']
    runs = list((out/'training'/'05b_prototypes_margins'/'runs').iterdir())
    cfgs = [read_json(d/'config.json') for d in runs if (d/'config.json').exists()]
    sims = [c for c in cfgs if c.get('clop_weight', 0) > 0 and c['clop_similarity'] != 'cosine']
    assert sims and all(c['clop_normalize'] is True for c in sims)   # as the authors' CLOPLoss.py
    assert len(runs) >= 2 * 6 and all((d/'run.nc').exists() for d in runs)
    copy = smoke_copy/'training'/'05b_prototypes_margins'/'runs'
    before = {d.name: (d/'run.nc').stat().st_mtime_ns for d in copy.iterdir()}
    from cosine_pitfalls.repro.plan import plan
    three = ['clop.table2', 'margins.fig3', 'margins.table4']
    assert [j['notebook'].name for j in plan('smoke', only=three)] == ['05b_prototypes_margins.ipynb']  # not part 1
    n = len(read_json(smoke_copy/'manifest.json')['runs'])
    r2 = run_main('reproduce', '--profile', 'smoke', '--only', *three,
                  '--out', smoke_copy, '--quiet')
    assert r2.returncode == 0 and len(read_json(smoke_copy/'manifest.json')['runs']) == n, r2.stderr
    assert {d.name: (d/'run.nc').stat().st_mtime_ns for d in copy.iterdir()} == before
