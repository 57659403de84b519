"""The package face: LICENSE, CITATION.cff, __version__, and a wheel that works outside the repository.

The wheel test builds the sdist and, from it, the wheel (`python -m build --no-isolation`: offline, and the
sdist proves MANIFEST.in carries what setup.py needs), installs the wheel with `pip --python ... --no-index
--no-deps` into a fresh venv made without pip, and runs it from a folder outside the repository with PYTHONPATH
unset: the README's library examples, then `cosine-pitfalls reproduce --only clop.thm1 --out DIR` with the
packages only the `dev` extra brings (nbdev, pytest, lightly, lightning, ...) hidden, as `repro` would install
it.
The dependencies are not downloaded again: a `.pth` file puts this interpreter's site-packages on the venv's
path, after the venv's own. A `.pth` line adds a folder without running the `.pth` files in it, so the editable
install of the checkout (an import hook started by such a file) stays off, and the venv's site-packages comes
first: `import cosine_pitfalls` can only find the wheel's copy, which the test checks. JUPYTER_PATH points at
this environment's share/jupyter, where a real `pip install '...whl[repro]'` would have put nbconvert's
templates. About a minute here (the reproduction runs one notebook)."""
import configparser, json, os, re, subprocess, sys, sysconfig
from pathlib import Path

import pytest

from conftest import ROOT

CFG = configparser.ConfigParser(delimiters=['=']); CFG.read(ROOT/'settings.ini')
VERSION = CFG['DEFAULT']['version']
PAPERS = ('The Hidden Pitfalls of the Cosine Similarity Loss',
          'On the Similarities of Embeddings in Contrastive Learning',
          'Preventing Collapse in Contrastive Learning with Orthonormal Prototypes (CLOP)',
          'Understanding Contrastive Learning Through the Lens of Margins',
          'Understanding Dimensional Collapse in Contrastive Self-Supervised Learning')
# README blocks that need an extra or the companion are not part of the library example
NOT_LIBRARY = re.compile(r'cosine_pitfalls[.\w]*\.(train|data|core|paper|runner|gradients|toy|clop_synthetic|'
                         r'directclr|embedding_norms|prototypes_margins)\b')


# the dev extra's own packages, hidden from the reproduction: the `repro` extra must be enough
DEV_ONLY = 'nbdev execnb ghapi pytest selenium lightly build lightning pytorch_lightning'
HIDE = """import os, sys
from importlib.machinery import PathFinder
class _Hidden(PathFinder):   # packages named in $HIDE_PACKAGES behave as if not installed
    names = set(os.environ.get('HIDE_PACKAGES', '').split())
    @classmethod
    def find_spec(cls, name, path=None, target=None):
        return None if name.split('.')[0] in cls.names else super().find_spec(name, path, target)
if _Hidden.names: sys.meta_path[:] = [_Hidden if f is PathFinder else f for f in sys.meta_path]
"""


def test_license_is_apache2():
    assert CFG['DEFAULT']['license'] == 'apache2'
    text = (ROOT/'LICENSE').read_text()
    assert 'Apache License' in text and 'Version 2.0, January 2004' in text
    assert 'END OF TERMS AND CONDITIONS' in text and len(text.splitlines()) > 150     # the full text


def test_citation_cites_the_package_and_the_five_papers():
    yaml = pytest.importorskip('yaml')
    cff = yaml.safe_load((ROOT/'CITATION.cff').read_text())
    assert cff['cff-version'] == '1.2.0' and cff['type'] == 'software' and cff['license'] == 'Apache-2.0'
    assert cff['title'] == CFG['DEFAULT']['lib_name'] and str(cff['version']) == VERSION
    assert [r['title'] for r in cff['references']] == list(PAPERS)
    assert all(r['authors'] for r in cff['references'])


def test_version():
    import cosine_pitfalls
    assert cosine_pitfalls.__version__ == VERSION


def library_example() -> str:
    "The README's python blocks that use the library alone, in order, as one script."
    blocks = re.findall(r'```python\n(.*?)```', (ROOT/'README.md').read_text(), flags=re.S)
    lib = [b for b in blocks if 'cosine_pitfalls' in b and not NOT_LIBRARY.search(b)]
    assert lib, 'README.md has no library example'
    return '\n'.join(lib)


def run(cmd, **kw):
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=600, **kw)
    assert r.returncode == 0, f'{cmd} failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}'
    return r


@pytest.fixture(scope='module')
def venv(tmp_path_factory):
    "A fresh venv holding the wheel built from the sdist; returns (venv, env for commands run in it, a cwd)."
    d = tmp_path_factory.mktemp('wheel')
    run([sys.executable, '-m', 'build', '--no-isolation', '--outdir', d/'dist', ROOT])   # sdist, then wheel
    whl, = (d/'dist').glob('cosine_pitfalls-*.whl')
    run([sys.executable, '-m', 'venv', '--without-pip', d/'venv'])
    clean = {k: v for k, v in os.environ.items() if k != 'PYTHONPATH'}   # pip must see only the new venv
    run([sys.executable, '-m', 'pip', '--python', d/'venv'/'bin'/'python', 'install', '--quiet', '--no-index',
         '--no-deps', whl], env=clean)
    site, = (d/'venv'/'lib').glob('python3*/site-packages')   # then the dependencies, after the install
    (site/'_deps_of_the_test_env.pth').write_text(sysconfig.get_paths()['purelib'] + '\n')
    (site/'sitecustomize.py').write_text(HIDE)   # started by every interpreter of the venv, kernels included
    env = {'PATH': f"{d/'venv'/'bin'}:/usr/bin:/bin", 'HOME': os.environ.get('HOME', str(d)),
           'JUPYTER_PATH': str(Path(sys.prefix)/'share'/'jupyter'), 'MPLBACKEND': 'Agg', 'OMP_NUM_THREADS': '1'}
    work = d/'elsewhere'; work.mkdir()
    return d/'venv', env, work


def test_wheel_carries_the_notebooks(venv):
    v, env, work = venv
    code = ('import cosine_pitfalls, sys; from cosine_pitfalls.repro.plan import find_nbs\n'
            'print(cosine_pitfalls.__file__); print(find_nbs())')
    pkg, nbs = run([v/'bin'/'python', '-c', code], env=env, cwd=work).stdout.split()
    assert Path(pkg).is_relative_to(v) and Path(nbs) == Path(pkg).parent/'nbs'
    assert ({p.relative_to(nbs).as_posix() for p in Path(nbs).rglob('*.ipynb')} ==   # the folders kept
            {p.relative_to(ROOT/'nbs').as_posix() for p in (ROOT/'nbs').rglob('*.ipynb')})


def test_wheel_runs_the_readme_library_examples(venv):
    v, env, work = venv
    code = ('import cosine_pitfalls, sys\nassert "site-packages" in cosine_pitfalls.__file__\n'
            + library_example() + '\nprint("library example ok")')
    assert 'library example ok' in run([v/'bin'/'python', '-c', code], env=env, cwd=work).stdout


def test_wheel_reproduces_one_id_outside_the_repository(venv):
    v, env, work = venv
    out = work/'out'
    hidden = dict(env, HIDE_PACKAGES=DEV_ONLY)
    check = ('import importlib\ndef present(m):\n    try: importlib.import_module(m); return True\n'
             '    except ModuleNotFoundError: return False\n'
             f'print([m for m in {DEV_ONLY!r}.split() if present(m)])')
    assert run([v/'bin'/'python', '-c', check], env=hidden, cwd=work).stdout.strip() == '[]'
    run([v/'bin'/'cosine-pitfalls', 'reproduce', '--only', 'clop.thm1', '--out', out, '--quiet'], env=hidden,
        cwd=work)
    res = json.loads((out/'results'/'clop.thm1.json').read_text())
    assert res['version'] == VERSION and res['git_sha'] == 'unknown'     # ran from the wheel, not a checkout
    assert res['verdict'] in ('agree', 'corrected', 'differ', 'inconclusive', 'rebuilt')
    assert all((out/f).exists() for f in res['files'])
    man = json.loads((out/'manifest.json').read_text())
    assert man['results']['clop.thm1']['status'] == 'ok'
    assert [r.get('html_error') for r in man['runs']] == [None]          # the executed notebook rendered too
