"""The installed `cosine-pitfalls` CLI killed mid-run (SIGKILL): what was finished is kept, the rerun completes only
the rest. (Split from test_cli_runs.py: `make test`'s two workers take a file each, and these two process-killing
tests, ~90 s together, kept one worker busy alone at the end.)"""
import os, signal, subprocess, time

from conftest import CLI, read_json, run_cli, run_main

from cosine_pitfalls.repro.verdicts import VERDICTS
from cosine_pitfalls.repro.paper import notebook_ids, section_ids

SECTION1 = section_ids(1)


def test_killed_run_keeps_what_it_finished(tmp_path):
    "SIGKILL mid-notebook: the IDs whose files were completely written are not recomputed by the rerun."
    out = tmp_path/'out'
    p = subprocess.Popen([str(CLI), 'reproduce', '--profile', 'smoke', '--section', '1', '--out', str(out), '--quiet'],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    t0 = time.time()
    # a result is done when its summary is in place (`[!.]`: not a writer's temporary, which a summary is until then)
    while time.time() - t0 < 300 and len(list((out/'results').glob('[!.]*.json'))) < 3 and p.poll() is None:
        time.sleep(0.05)
    assert p.poll() is None, 'the run ended before it could be killed'
    os.killpg(p.pid, signal.SIGKILL); p.wait(timeout=60)
    done = {f.stem: f.stat().st_mtime_ns for f in (out/'results').glob('[!.]*.json')}
    assert 3 <= len(done) < len(SECTION1), done
    r = run_cli('reproduce', '--profile', 'smoke', '--section', '1', '--out', out, '--quiet')
    assert r.returncode == 0, r.stderr
    for i, t in done.items(): assert (out/'results'/f'{i}.json').stat().st_mtime_ns == t, f'{i} was recomputed'
    m = read_json(out/'manifest.json')
    assert sorted(m['runs'][-1]['ids']) == sorted(set(SECTION1) - set(done))
    assert all(m['results'][i]['status'] == 'ok' for i in SECTION1)
    assert all(m['results'][i].get('recovered') for i in done)


def test_section5_norms_killed_midway_resumes_without_retraining(tmp_path):
    """05a at smoke through the CLI, SIGKILLed once some runs are done: the rerun trains only what was missing,
    registers the asked ID, and a third run trains nothing and starts no kernel. Table 1's 12 runs (the smoke
    reproduction `conftest.smoke` runs the whole notebook)."""
    out, ids = tmp_path/'out', ['pitfalls.table1']
    assert set(ids) <= set(notebook_ids('05a_embedding_norms.ipynb'))
    runs = out/'training'/'05a_embedding_norms'/'runs'
    p = subprocess.Popen([str(CLI), 'reproduce', '--profile', 'smoke', '--only', *ids, '--out', str(out), '--quiet'],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    t0 = time.time()
    while time.time() - t0 < 300 and len(list(runs.glob('*/run.nc'))) < 4 and p.poll() is None: time.sleep(0.05)
    assert p.poll() is None, 'the run ended before it could be killed'
    # the whole job at once, as a scheduler kills it: the kernel (its own session) would otherwise follow its parent
    # only within a second, time enough for a fast machine to finish all 12 two-step runs and leave nothing to resume
    import psutil                                      # ipykernel's own dependency
    for c in psutil.Process(p.pid).children(recursive=True):
        try: c.kill()
        except psutil.NoSuchProcess: pass              # one that ended on its own meanwhile
    os.killpg(p.pid, signal.SIGKILL); p.wait(timeout=60)
    time.sleep(1)
    done = {f: f.stat().st_mtime_ns for f in runs.glob('*/run.nc')}
    assert len(done) >= 4 and not list((out/'results').glob('[!.]*.json'))
    r = run_cli('reproduce', '--profile', 'smoke', '--only', *ids, '--out', out, '--quiet')
    assert r.returncode == 0, r.stderr
    for f, t in done.items(): assert f.stat().st_mtime_ns == t, f'{f.parent.name} was trained again'
    assert len(list(runs.glob('*/run.nc'))) > len(done)
    for i in ids:
        s = read_json(out/'results'/f'{i}.json')
        assert s['verdict'] in VERDICTS and 'digits' in s['ours'] and 'CIFAR' not in s['ours']
    n = len(read_json(out/'manifest.json')['runs'])
    r2 = run_main('reproduce', '--profile', 'smoke', '--only', *ids, '--out', out, '--quiet')
    assert r2.returncode == 0 and len(read_json(out/'manifest.json')['runs']) == n, r2.stderr
