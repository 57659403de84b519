"""The installed CLI rerunning section 1 on a copy of the smoke reproduction: --force, a changed parameter and edited
code recompute, the same code and parameters skip. (Its own file: three CLI reproductions, ~80 s, and xdist's
loadfile gives each file to one worker; beside test_cli.py's other tests it left one worker running alone at the
end of `make test`.)"""
import json, shutil

from conftest import NBS, read_json, run_cli, run_main

from cosine_pitfalls.repro.paper import notebook_of, section_ids

SECTION1 = section_ids(1)


def test_changed_parameter_force_or_edited_code_reruns(smoke_copy, tmp_path):
    """--force recomputes, a changed parameter recomputes, code edited since recomputes once (then skips), the same
    code and parameters skip; each rerun touches no other result."""
    out = smoke_copy
    n = len(read_json(out/'manifest.json')['runs'])
    other = next(i for i in SECTION1 if i != 'clop.thm1')
    before = (out/'results'/f'{other}.json').stat().st_mtime_ns
    r2 = run_cli('reproduce', '--profile', 'smoke', '--only', 'clop.thm1', '--force', '--out', out, '--quiet')
    assert r2.returncode == 0, r2.stderr
    m = read_json(out/'manifest.json')
    assert len(m['runs']) == n + 1 and m['runs'][-1]['ids'] == ['clop.thm1']
    assert (out/'results'/f'{other}.json').stat().st_mtime_ns == before
    r3 = run_cli('reproduce', '--profile', 'smoke', '--only', 'clop.thm1', '-p', 'seed=1', '--out', out, '--quiet')
    assert r3.returncode == 0, r3.stderr
    m = read_json(out/'manifest.json')
    assert len(m['runs']) == n + 2 and m['results']['clop.thm1']['params']['seed'] == 1
    assert read_json(out/'results'/'clop.thm1.json')['params']['seed'] == 1
    # code edited: `other` is still as the smoke reproduction computed it (seed 0)
    same = run_main('reproduce', '--profile', 'smoke', '--only', other, '--out', out, '--quiet')
    assert same.returncode == 0, same.stderr
    assert len(read_json(out/'manifest.json')['runs']) == n + 2, 'unchanged code and parameters must be skipped'
    nbs = tmp_path/'nbs'; shutil.copytree(NBS, nbs)
    p = nbs/notebook_of(SECTION1[0]).path; nb = json.loads(p.read_text())
    k = next(j for j, c in enumerate(nb['cells']) if c['cell_type'] == 'code' and 'parameters' not in c.get('metadata', {}).get('tags', []))
    nb['cells'][k]['source'] = ''.join(nb['cells'][k]['source']) + '\n# an edit to the code'
    p.write_text(json.dumps(nb))
    for expect, runner in ((n + 3, run_cli), (n + 3, run_main)):            # recomputed once, then skipped
        r4 = runner('reproduce', '--profile', 'smoke', '--only', other, '--nbs', nbs, '--out', out, '--quiet')
        assert r4.returncode == 0, r4.stderr
        m = read_json(out/'manifest.json')
        assert len(m['runs']) == expect and m['runs'][-1]['ids'] == [other]
