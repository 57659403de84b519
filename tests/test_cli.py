"""The installed `cosine-pitfalls` CLI: list, validation errors, one smoke run of section 1 and what is done with it
(skip, force, edits, report, modes). Failures, interruption and sections 4-5: test_cli_runs.py."""
import json, shutil, time
from pathlib import Path

import pytest

from conftest import NBS, read_json, run_cli, run_main, tree

from cosine_pitfalls.repro.verdicts import VERDICTS
from cosine_pitfalls.repro.paper import PAPER, notebook_of, section_ids

SECTION1 = section_ids(1)


def test_list_names_every_id(cli, tmp_path):
    r = cli('list', '--out', tmp_path)
    assert r.returncode == 0, r.stderr
    rows = {l.split()[0]: l for l in r.stdout.splitlines()[1:]}
    assert set(rows) == set(PAPER)
    for i in SECTION1: assert 'not run' in rows[i]
    for i in PAPER:
        assert notebook_of(i).file in rows[i]
        if not (NBS/notebook_of(i).path).exists(): assert 'no notebook' in rows[i]


BAD = [
    (['--profile', 'fast'], "profile must be one of 'smoke', 'cpu', 'cpu-long', 'gpu', 'paper'; got 'fast'"),
    (['--only', 'clop.thm9'], "unknown result ID(s) 'clop.thm9'"),
    (['--section', '9'], 'section must be one of 1, 2, 3, 4, 5; got 9'),
    (['--section', '1', '-p', 'no_such=1'], "unknown parameter 'no_such' for 01_gradients.ipynb; allowed:"),
    (['--section', '1', '-p', 'seed=abc'], "parameter seed must be an integer like 3 (no leading zeros); got 'abc'"),
    (['--section', '1', '-p', 'seed=007'], "parameter seed must be an integer like 3 (no leading zeros); got '007'"),
    (['--section', '1', '-p', 'profile=cpu'], 'parameter profile is set by the runner'),
    (['--section', '1', '-p', 'seed'], 'parameters are given as -p name=value'),
    (['--section', '1', '-p', 'seed=3', '-p', 'seed=4'],
     "parameter(s) ['seed'] given more than once (-p seed=3, -p seed=4); give each once"),
    (['--only', 'clop.thm1', '--section', '2'], "--only ['clop.thm1'] lie outside --section [2]"),
    (['--nbs', '/no/such/folder'], "nbs: '/no/such/folder' is not a folder"),
]


@pytest.mark.parametrize('k,args,msg', [(k, *b) for k, b in enumerate(BAD)], ids=[' '.join(a) for a, _ in BAD])
def test_bad_input_is_one_clear_error_and_loses_nothing(cli, tmp_path, k, args, msg):
    "The first two through the console script, the others through its `main` in this process (same code, 4 s less)."
    out = tmp_path/'out'; out.mkdir()
    (out/'report.md').write_text('an earlier report'); (out/'manifest.json').write_text('{"results": {}}')
    before = tree(out)
    r = (cli if k < 2 else run_main)('reproduce', *args, '--out', out, '--quiet')
    assert r.returncode == 2, r.stderr
    assert msg in r.stderr
    assert 'Traceback' not in r.stderr
    assert tree(out) == before


def test_every_id_has_a_notebook_that_registers_it():
    for i in PAPER:
        nb = NBS/notebook_of(i).path
        assert nb.exists() and f"'{i}'" in nb.read_text(encoding='utf-8'), i


def test_a_folder_without_the_notebook_says_so(cli, tmp_path):
    """A notebook folder without an ID's notebook: `list` says the folder lacks it, `reproduce` refuses the ID
    before anything runs, naming the notebook, and writes nothing (issue 28: it said 'not yet implemented')."""
    i = 'clop.fig6'
    nbs = tmp_path/'nbs'; nbs.mkdir()
    for p in (NBS/'repro').glob('*.ipynb'):   # a foreign folder holding the notebooks flat
        if p.name != notebook_of(i).file: shutil.copy(p, nbs)
    r = cli('list', '--nbs', nbs, '--out', tmp_path/'out')
    assert r.returncode == 0, r.stderr
    rows = {l.split()[0]: l for l in r.stdout.splitlines()[1:]}
    assert f'no notebook (the folder {nbs} lacks {notebook_of(i).file})' in rows[i], rows[i]
    assert 'not run' in rows['pitfalls.table1']
    r = run_main('reproduce', '--only', i, '--nbs', nbs, '--out', tmp_path/'out', '--quiet')
    assert r.returncode == 2 and f"the folder {nbs} lacks ['{notebook_of(i).file}'], the notebook(s) of ['{i}']" in r.stderr, r.stderr
    assert 'Traceback' not in r.stderr and not (tmp_path/'out'/'results').exists()


def test_an_id_its_notebook_does_not_register_is_not_yet_implemented(tmp_path):
    i = 'clop.fig6'
    nbs = tmp_path/'nbs'; nbs.mkdir()
    for p in (NBS/'repro').glob('*.ipynb'): shutil.copy(p, nbs)
    f = nbs/notebook_of(i).file; f.write_text(f.read_text(encoding='utf-8').replace(f"'{i}'", "'clop.figX'"))
    r = run_main('list', '--nbs', nbs, '--out', tmp_path/'out')
    rows = {l.split()[0]: l for l in r.stdout.splitlines()[1:]}
    assert r.returncode == 0 and 'not yet implemented' in rows[i], (r.stderr, rows[i])
    r = run_main('reproduce', '--only', i, '--nbs', nbs, '--out', tmp_path/'out', '--quiet')
    assert r.returncode == 2 and f"['{i}'] are not yet implemented" in r.stderr, r.stderr


def test_smoke_section1_registers_every_id(smoke):
    "Section 1 of the shared smoke reproduction (`conftest.smoke`): every ID's files, summary, manifest and report row."
    import xarray as xr
    out, _ = smoke
    for i in SECTION1:
        s = read_json(out/'results'/f'{i}.json')
        assert s['id'] == i and s['profile'] == 'smoke' and s['verdict'] in VERDICTS and s['ours']
        ds = xr.load_dataset(out/'results'/f'{i}.nc', engine='h5netcdf')
        assert ds.attrs['id'] == i and ds.attrs['profile'] == 'smoke' and 'git_sha' in ds.attrs
        assert json.loads(ds.attrs['parameters'])['seed'] == 0
        assert (out/'tables'/f'{i}.csv').stat().st_size > 0 and (out/'tables'/f'{i}.md').read_text().startswith(f'# {i}')
        if PAPER[i].kind == 'figure': assert (out/'figures'/f'{i}.png').read_bytes()[:4] == b'\x89PNG'
    m = read_json(out/'manifest.json')
    assert m['environment']['packages']['torch'] and m['git_sha'] and m['environment']['device']
    assert all(m['results'][i]['status'] == 'ok' for i in SECTION1)
    run1 = next(r for r in m['runs'] if r['notebook'] == '01_gradients.ipynb')
    assert run1['wall_s'] > 0 and sorted(run1['registered']) == sorted(SECTION1)
    assert (out/'runs'/'01_gradients.smoke.ipynb').exists()
    rep = (out/'report.md').read_text()
    for i in PAPER: assert f'| `{i}` |' in rep
    for i in SECTION1:
        s = read_json(out/'results'/f'{i}.json')
        label = s['verdict'] + (' (fragile)' if s.get('fragile') else '') + f" — {s['parts_line']}"
        assert f"| {label} |" in rep.split(f'| `{i}` |')[1].split('\n')[0], i        # the verdict and its parts


def test_smoke_kernel_is_pinned_and_recorded(smoke):
    "Every kernel ran on one thread (intra- and inter-op), AVX2 where the CPU has it; the runs and the report say so."
    from cosine_pitfalls.repro.pins import cpu_flags
    from cosine_pitfalls.repro.report import describe_environment
    out, _ = smoke
    m = read_json(out/'manifest.json')
    envs = [r['environment'] for r in m['runs']]
    for env in envs:
        assert (env['threads'], env['interop_threads']) == (1, 1) and env['pinned']['OMP_NUM_THREADS'] == '1'
        assert env['torch'] and env['numpy'] and env['python'] and env['cpu']
        if {'avx2', 'fma'} <= cpu_flags():
            assert (env['isa'], env['onednn_isa'], env['pinned']['ATEN_CPU_CAPABILITY']) == ('AVX2', 'Intel AVX2', 'avx2')
    line = f'Computed with: {describe_environment(envs[0])} (all {len(list((out/"results").glob("*.json")))} results on disk).'
    rep = (out/'report.md').read_text()
    assert line in rep and '- `testable`: ' in rep and '- `fragile`: ' in rep


def test_rerun_skips_what_is_done(smoke_copy):
    out = smoke_copy
    m0 = read_json(out/'manifest.json'); stamps = {p: p.stat().st_mtime_ns for p in (out/'results').iterdir()}
    r2 = run_cli('reproduce', '--profile', 'smoke', '--section', '1', '--out', out, '--quiet')
    assert r2.returncode == 0, r2.stderr
    assert len(read_json(out/'manifest.json')['runs']) == len(m0['runs'])
    assert {p: p.stat().st_mtime_ns for p in (out/'results').iterdir()} == stamps


def test_report_rebuilds_from_disk(smoke_copy, cli):
    "`report` rebuilds report.md, report.html and a missing notebook page from the files on disk."
    out = smoke_copy
    old, old_html = (out/'report.md').read_text(), (out/'report.html').read_text()
    page = out/'notebooks'/'01_gradients.smoke.html'
    for f in (out/'report.md', out/'report.html', page): f.unlink()
    r2 = cli('report', '--out', out)
    assert r2.returncode == 0, r2.stderr
    assert r2.stdout.split() == [str(out/'report.md'), str(out/'report.html')]
    new = (out/'report.md').read_text()
    strip = lambda s: [l for l in s.splitlines() if not l.startswith('git:')]
    assert strip(new) == strip(old)
    strip_html = lambda s: [l for l in s.splitlines() if not l.startswith('<p>git:')]
    assert strip_html((out/'report.html').read_text()) == strip_html(old_html)
    assert page.exists()


def test_every_id_is_anchored_in_its_rendered_notebook(smoke):
    "Each executed notebook is rendered to notebooks/, one anchor per registered ID, each linked from report.html."
    from cosine_pitfalls.repro.report import report_problems
    out, _ = smoke
    rep = (out/'report.html').read_text()
    for i in PAPER:
        stem = notebook_of(i).stem
        assert f'id="{i}"' in (out/'notebooks'/f'{stem}.smoke.html').read_text(), i
        assert f'<a href="notebooks/{stem}.smoke.html#{i}"><code>{i}</code></a>' in rep, i
    assert report_problems(out/'report.html') == []
    for run in read_json(out/'manifest.json')['runs']:
        assert run['html'] == f"notebooks/{run['notebook'][:-6]}.smoke.html" and 'html_error' not in run


def test_files_get_the_usual_mode_and_the_report_links_them(smoke):
    "Under umask 022 (set by `make smoke` and conftest), every file the runner writes is 0644; the report links each row's files and figures."
    out, _ = smoke
    modes = {str(f.relative_to(out)): f.stat().st_mode & 0o777 for f in out.rglob('*') if f.is_file()}
    assert modes and all(m == 0o644 for m in modes.values()), {f: oct(m) for f, m in modes.items() if m != 0o644}
    rep = (out/'report.md').read_text()
    for i in PAPER:
        row = rep.split(f'| `{i}` |')[1].split('\n')[0]
        assert f'[table](tables/{i}.md)' in row and f'[data](results/{i}.nc)' in row
        if PAPER[i].kind == 'figure':
            assert f'[figure](figures/{i}.png)' in row and f'![{i}](figures/{i}.png)' in rep
    links = [l.split('](')[1].split(')')[0] for l in rep.split('[')[1:] if '](' in l]
    assert sum(l.startswith('https://') for l in links) == 5              # the five papers, on the first screen
    for link in links:
        if not link.startswith('https://'): assert (out/link).exists(), link


def test_kernel_warning_kept_out_of_our_output(smoke):
    assert 'without encryption' not in smoke[1]


@pytest.mark.parametrize('args,msg', [
    (['reproduce', '--profile', 'smoke', '--section', '1', '--out', '/proc/x', '--quiet'], "out: cannot create the folder '/proc/x'"),
    (['report', '--out', '/no/such/out'], "out: folder '/no/such/out' does not exist"),
])
def test_unusable_out_is_one_line(args, msg):
    r = run_main(*args)
    assert r.returncode == 2 and msg in r.stderr and 'Traceback' not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert not Path('/no/such/out').exists()
