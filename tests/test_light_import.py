"""A light import: the library's loss, mechanism and evaluation modules (and the collapse monitor, and the plot of a
run) load in a fresh interpreter without pandas, xarray, papermill, matplotlib or torchvision; models and methods
load without torchvision, which comes in only when a ResNet is built. `benchmarks/import_time.py` times these imports.
The checks of single modules run in children forked from one interpreter that has loaded torch and NumPy alone
(checked: none of the heavy modules): torch's two seconds of loading are paid once, not once per module."""
import json, os, subprocess, sys
from pathlib import Path

import pytest

import cosine_pitfalls

HEAVY = ('pandas', 'xarray', 'papermill', 'matplotlib', 'torchvision')
LIGHT = ('losses', 'mechanisms', 'similarity_losses', 'evaluation', 'diagnostics', 'utils', 'plot')
SRC = str(Path(cosine_pitfalls.__file__).parent.parent)   # the package these tests import, not another install


def loaded_after(code: str) -> list[list[str]]:
    """Run `code` in a fresh interpreter outside the repository: the heavy modules in sys.modules at each
    `heavy()` call of `code`, and at its end."""
    probe = (f'import json, sys\ndef heavy(): print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))\n'
             f'{code}\nheavy()')
    env = {k: v for k, v in os.environ.items() if k != 'PYTHONSTARTUP'}
    env['PYTHONPATH'] = SRC
    r = subprocess.run([sys.executable, '-c', probe], capture_output=True, text=True, cwd='/', env=env,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    return [json.loads(l) for l in r.stdout.strip().splitlines() if l.startswith('[')]


FORK = f"""import json, os, sys
HEAVY = {HEAVY!r}
import numpy, torch
assert not [m for m in HEAVY if m in sys.modules], [m for m in HEAVY if m in sys.modules]   # the parent is light
for name, code in json.loads(sys.stdin.read()).items():
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r); out = os.fdopen(w, 'w')
        def heavy(): out.write(json.dumps([m for m in HEAVY if m in sys.modules]) + chr(10)); out.flush()
        try: exec(code, dict(heavy=heavy)); heavy(); os._exit(0)
        except BaseException as e: out.write('error ' + repr(e) + chr(10)); out.flush(); os._exit(1)
    os.close(w)
    with os.fdopen(r) as f: text = f.read()
    _, status = os.waitpid(pid, 0)
    print(json.dumps(dict(name=name, status=status, text=text)))
"""


@pytest.fixture(scope='module')
def forked():
    """name -> the heavy modules at each `heavy()` call and at the end, for every probe below, each run in a child
    forked from one light interpreter outside the repository."""
    codes = {**{n: f'import cosine_pitfalls.{n}' for n in LIGHT},
             'resnet': "import cosine_pitfalls.methods\nheavy()\nfrom cosine_pitfalls.models import make_backbone\n"
                       "make_backbone('resnet18')",
             'results': 'import cosine_pitfalls.repro.results'}
    env = {k: v for k, v in os.environ.items() if k != 'PYTHONSTARTUP'}
    env['PYTHONPATH'] = SRC
    r = subprocess.run([sys.executable, '-c', FORK], input=json.dumps(codes), capture_output=True, text=True,
                       cwd='/', env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    rows = [json.loads(l) for l in r.stdout.strip().splitlines()]
    bad = {x['name']: x['text'] for x in rows if x['status'] != 0}
    assert not bad, bad
    return {x['name']: [json.loads(l) for l in x['text'].splitlines() if l.startswith('[')] for x in rows}


@pytest.mark.parametrize('name', LIGHT)
def test_light_module_imports_nothing_heavy(forked, name):
    assert forked[name] == [[]]


def test_torchvision_only_when_a_resnet_is_built(forked):
    "methods (and models, which it imports) load without torchvision; building a ResNet loads it."
    at_import, after_build = forked['resnet']
    assert 'torchvision' not in at_import
    assert 'torchvision' in after_build          # the probe sees torchvision once it is really used


def test_probe_sees_a_heavy_import(forked):
    "The check can fail: importing the companion's core loads pandas and xarray (in a forked child, as the others)."
    assert {'pandas', 'xarray'} <= set(forked['results'][0])
    assert loaded_after('import cosine_pitfalls.repro.results')[0] == forked['results'][0]   # as in a fresh one


def test_cli_starts_without_torch():
    """The console script's module loads without torch (its commands that compute nothing answer in a fraction of a
    second); a command that trains or measures loads it when it runs."""
    env = {k: v for k, v in os.environ.items() if k != 'PYTHONSTARTUP'}; env['PYTHONPATH'] = SRC
    r = subprocess.run([sys.executable, '-c', 'import sys, cosine_pitfalls.repro.cli; print("torch" in sys.modules)'],
                       capture_output=True, text=True, cwd='/', env=env, timeout=300)
    assert r.returncode == 0 and r.stdout.strip() == 'False', (r.stdout, r.stderr)


EXTRAS = ('torchvision', 'PIL', 'xarray', 'pandas', 'h5netcdf', 'h5py', 'sklearn', 'scipy', 'tqdm',
          'matplotlib', 'seaborn', 'papermill', 'IPython', 'ipywidgets', 'nbformat', 'nbconvert', 'tabulate',
          'fastcore', 'lightning', 'pytorch_lightning')
BLOCK = f'''import sys
from importlib.machinery import PathFinder
class NotInstalled(PathFinder):   # the extras' packages behave as if absent: `pip install` without extras
    hidden = set({EXTRAS!r})
    @classmethod
    def find_spec(cls, name, path=None, target=None):
        if name.split('.')[0] in cls.hidden: return None     # as for a package that is not installed
        return super().find_spec(name, path, target)
sys.meta_path[:] = [NotInstalled if f is PathFinder else f for f in sys.meta_path]
'''


def test_library_works_without_the_extras():
    "With only torch and numpy, the library's modules import and a small model trains one SSL step."
    code = BLOCK + '''
import torch
from cosine_pitfalls import utils, losses, similarity_losses, mechanisms, evaluation, models, methods
from cosine_pitfalls.methods import MethodConfig, SSLMethod
from cosine_pitfalls.models import make_backbone
for method in ('simclr', 'byol'):
    m = SSLMethod(MethodConfig(method=method), make_backbone('small_cnn', in_channels=1, width=8))
    out = m([torch.randn(16, 1, 16, 16), torch.randn(16, 1, 16, 16)])
    out.loss.backward()
    assert torch.isfinite(out.loss)
'''
    assert loaded_after(code) == [[]]


def test_blocking_works():
    "The blocker really hides the extras: building a ResNet then fails, naming torchvision."
    env = {k: v for k, v in os.environ.items() if k != 'PYTHONSTARTUP'}; env['PYTHONPATH'] = SRC
    code = BLOCK + "from cosine_pitfalls.models import make_backbone\nmake_backbone('resnet18')"
    r = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, cwd='/', env=env,
                       timeout=300)
    assert r.returncode != 0 and "No module named 'torchvision" in r.stderr


REPRO_ONLY = ('papermill', 'matplotlib', 'seaborn', 'tabulate', 'nbformat', 'nbconvert', 'jupyterlab',
              'fastcore', 'IPython', 'ipykernel', 'ipywidgets', 'nbdev', 'lightly', 'lightning',
              'pytorch_lightning')


def test_trainer_works_with_the_train_extra():
    "With the `train` extra but not the companion's packages, the trainer imports and loads a dataset."
    code = BLOCK.replace(repr(EXTRAS), repr(REPRO_ONLY)) + '''
import cosine_pitfalls.train
from cosine_pitfalls.data import load_dataset
from cosine_pitfalls.models import make_backbone
d = load_dataset('digits')
assert make_backbone('resnet18').out_dim == 512
'''
    assert loaded_after(code)[-1] == ['pandas', 'xarray', 'torchvision']
