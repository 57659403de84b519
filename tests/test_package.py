"The installed package: importable, versioned, console script present, notebooks and README consistent."
import configparser, json, subprocess, sys
from pathlib import Path

import pytest

from conftest import CLI, NBS, ROOT


def test_installed_version_matches_settings():
    import cosine_pitfalls
    cfg = configparser.ConfigParser(delimiters=['=']); cfg.read(ROOT/'settings.ini')
    assert cosine_pitfalls.__version__ == cfg['DEFAULT']['version']
    from importlib.metadata import version
    assert version('cosine_pitfalls') == cfg['DEFAULT']['version']


def test_package_imports_headless_in_fresh_interpreter():
    "The exported modules import without Jupyter, in a plain interpreter outside the repository."
    from cosine_pitfalls.repro.paper import NOTEBOOKS
    mods = [f'cosine_pitfalls.repro.{m}' for m in ('paper', 'verdicts', 'results', 'plan', 'report', 'execute', 'cli')] + \
           [f'cosine_pitfalls.repro.{n.module}' for n in NOTEBOOKS.values() if (NBS/n.path).exists()]
    code = 'import importlib,sys\n' + ''.join(f'importlib.import_module({m!r})\n' for m in mods) + 'print("ok")'
    r = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, cwd='/', timeout=300,
                       env={'MPLBACKEND': 'Agg', 'PATH': '/usr/bin:/bin'})
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == 'ok'


def test_console_script_installed():
    assert CLI.exists()
    r = subprocess.run([str(CLI), '--help'], capture_output=True, text=True)
    assert r.returncode == 0 and 'reproduce' in r.stdout


def _markdown_of_index():
    nb = json.loads((NBS/'index.ipynb').read_text())
    return [''.join(c['source']) for c in nb['cells'] if c['cell_type'] == 'markdown']


def test_readme_mirrors_index():
    "README.md is hand-written (no Quarto here) but must carry every markdown cell of nbs/index.ipynb."
    readme = (ROOT/'README.md').read_text()
    for md in _markdown_of_index():
        assert md in readme, f'README.md lacks this part of nbs/index.ipynb:\n{md[:200]}'


def test_readme_two_commands_are_what_ci_runs():
    readme = (ROOT/'README.md').read_text()
    assert 'make reproduce' in readme and 'make test' in readme
    ci = (ROOT/'.ci'/'run').read_text().split('\n')
    steps = [l for l in ci if l and not l.startswith('#') and not l.startswith('set ') and not l.startswith('cd ')]
    # besides `make test`, CI only installs the browser the browser test needs (beside the venv's set-up, which
    # `make test` would do first anyway) and makes that test required
    browser = ['apt_pid=; mkdir -p build',
               'if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then',
               '  export DEBIAN_FRONTEND=noninteractive',
               '  ( apt-get update -qq && apt-get install -y -qq chromium chromium-driver ) > build/ci-apt.log 2>&1 &',
               '  apt_pid=$!', 'fi', 'make setup', 'if [ -n "$apt_pid" ]; then',
               '  wait "$apt_pid" || { echo "installing chromium failed:"; tail -n 30 build/ci-apt.log; exit 1; }', 'fi',
               'export COSINE_PITFALLS_REQUIRE_BROWSER=1']
    assert steps == browser + ['make test'], steps


def test_every_notebook_has_one_parameters_cell_when_runnable():
    from cosine_pitfalls.repro.paper import NOTEBOOKS
    for f in NOTEBOOKS:
        p = NBS/NOTEBOOKS[f].path
        if not p.exists(): continue
        nb = json.loads(p.read_text())
        tagged = [c for c in nb['cells'] if 'parameters' in c.get('metadata', {}).get('tags', [])]
        assert len(tagged) == 1, f'{f}: {len(tagged)} parameters cells'
        assert not ''.join(tagged[0]['source']).startswith('#| export'), f'{f}: parameters cell must not be exported'


@pytest.mark.parametrize('profile', ['smoke', 'cpu', 'cpu-long', 'gpu', 'paper'])
def test_profiles_validate_against_notebooks(profile):
    "Each implemented section's PROFILES dict names only parameters of its notebook, with the right types."
    from cosine_pitfalls.repro.plan import plan
    from cosine_pitfalls.repro.paper import NOTEBOOKS
    done = [f for f in NOTEBOOKS if (NBS/NOTEBOOKS[f].path).exists()]
    assert done, 'no section notebook yet'
    jobs = plan(profile, sections=sorted({NOTEBOOKS[f].section for f in done}), nbs=NBS)
    assert [j['notebook'].name for j in jobs] == done
    for j in jobs: assert j['params']['profile'] == profile


def test_every_paper_map_id_is_registered_once():
    from cosine_pitfalls.repro.paper import PAPER
    shared = Path(ROOT.parent/'shared'/'PAPER_MAP.md')
    if not shared.exists(): pytest.skip('../shared/PAPER_MAP.md not beside the checkout')
    import re
    ids = set(re.findall(r'`([a-z]+\.[a-z0-9_]+)`', shared.read_text()))
    ids = {i for i in ids if i.split('.')[0] in {'pitfalls', 'lee', 'clop', 'margins', 'directclr'}}
    assert ids <= set(PAPER), f'missing from the registry: {sorted(ids - set(PAPER))}'
    # each row's claim is carried verbatim (the claim itself may contain '|', e.g. |A|)
    rows = dict(re.findall(r'^\| `([a-z]+\.[a-z0-9_]+)` \| (.*?) \|\s*$', shared.read_text(), flags=re.M))
    assert rows, 'no table rows parsed from PAPER_MAP.md'
    wrong = {i: (t, PAPER[i].paper) for i, t in rows.items() if PAPER[i].paper != t.strip()}
    assert not wrong, f'registry statements differ from PAPER_MAP.md: {wrong}'
