"Shared fixtures: the installed console script, the repository's notebooks, a helper to run the CLI."
import getpass, json, os, subprocess, sys, tempfile
from pathlib import Path

import pytest

from cosine_pitfalls.repro.pins import kernel_env    # the standard library only: torch is not loaded yet

ROOT = Path(__file__).resolve().parents[1]
NBS = ROOT/'nbs'
CLI = Path(sys.executable).parent/'cosine-pitfalls'
os.umask(0o022)   # the usual umask, inherited by every CLI run: the file-mode test expects 0644

# The report's pins, here: every test process (and every process it starts: CLI runs, kernels, training workers)
# computes as a `cpu` kernel does, on one thread and, where the CPU has AVX2, with AVX2 kernels, whatever the
# machine's best instruction set or the variables the suite was started with (an AVX-512 machine's own kernels
# round differently, and the recorded bits of test_method_losses.py and test_reproducible.py are AVX2's). Torch
# reads the variables when it is loaded, so they are set before any test module imports it; xdist's workers start
# after this file is read and inherit them. One thread per process also keeps two workers from each spinning two
# OpenMP threads on two cores (one 5 s test took minutes).
if 'torch' in sys.modules:
    raise pytest.UsageError('torch was imported before tests/conftest.py could pin its kernels (a plugin?); '
                            'the tests that compare recorded bits would compute with the wrong instruction set')
os.environ.update(kernel_env('cpu'))
# inductor's cache (torch.compile on the CPU) does not tell kernels compiled for AVX-512 from AVX2 ones: a kernel an
# unpinned process had cached, loaded by a pinned one, raised 'index out of bounds' or crashed the worker. The
# pinned processes keep a cache of their own.
os.environ['TORCHINDUCTOR_CACHE_DIR'] = os.path.join(tempfile.gettempdir(), f'torchinductor_{getpass.getuser()}_'
                                                     + os.environ.get('ATEN_CPU_CAPABILITY', 'unpinned'))


def isa_key(env: dict) -> str:
    "The key recorded bits are kept under: the instruction set torch ran and the CPU's vendor ('AVX2 AMD')."
    cpu = str(env.get('cpu') or '')
    vendor = next((v for v in ('AMD', 'Intel', 'ARM', 'Apple') if v.lower() in cpu.lower()), 'other')
    return f"{env['isa']} {vendor}"


def this_machine() -> str:
    "`isa_key` of this process: the instruction set torch computes with here (pinned above) and the CPU's vendor."
    import torch
    from cosine_pitfalls.repro.execute import cpu_model
    return isa_key(dict(isa=torch.backends.cpu.get_cpu_capability(), cpu=cpu_model()))


def run_cli(*args, timeout=600, env=None, **kw):
    "Run the installed `cosine-pitfalls` console script (in `env`, default ours); return the CompletedProcess."
    env = dict(env or os.environ, PYTHONUNBUFFERED='1')
    return subprocess.run([str(CLI), *map(str, args)], capture_output=True, text=True, timeout=timeout, env=env, **kw)


def run_main(*args, cwd=None, env=None, **_):
    """The CLI's `main` in this process, for the refusals that happen before any kernel or training (~0.1 s, where
    the console script spends ~4 s importing): papermill's execute and the trainer raise if reached."""
    import contextlib, io, types
    import papermill
    import cosine_pitfalls.train as tr
    def reached(*a, **k): raise AssertionError('a kernel or a training run was started')
    out, err, old_env, old_cwd = io.StringIO(), io.StringIO(), dict(os.environ), os.getcwd()
    mp = pytest.MonkeyPatch()
    mp.setattr(papermill, 'execute_notebook', reached); mp.setattr(tr, '_train', reached)
    try:
        if env is not None: os.environ.clear(); os.environ.update(env)
        if cwd is not None: os.chdir(cwd)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            from cosine_pitfalls.repro.cli import main
            try: code = main([str(a) for a in args])
            except SystemExit as e: code = e.code if isinstance(e.code, int) else 2     # argparse's refusals
    finally:
        mp.undo(); os.chdir(old_cwd); os.environ.clear(); os.environ.update(old_env)
    return types.SimpleNamespace(returncode=code, stdout=out.getvalue(), stderr=err.getvalue())


def tree(d: Path) -> dict:
    "Relative path -> bytes of every file under d (to prove nothing changed)."
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(Path(d).rglob('*')) if p.is_file()}


def read_json(p):
    return json.loads(Path(p).read_text())


@pytest.fixture
def cli():
    assert CLI.exists(), f'console script not installed at {CLI}'
    return run_cli



# ------------------------------------------------------------------ one smoke reproduction of every section, shared
SMOKE_ENV = 'COSINE_PITFALLS_SMOKE'   # the folder `make smoke` reproduced every section into (its log beside it)


def _smoke_checked(out: Path) -> Path:
    "The folder, once its manifest says every section notebook ran and registered what it was asked."
    from cosine_pitfalls.repro.paper import NOTEBOOKS
    m = read_json(out/'manifest.json')
    ran = {r['notebook']: r for r in m['runs']}
    missing = sorted(set(NOTEBOOKS) - set(ran))
    bad = {nb: r['status'] for nb, r in ran.items() if r['status'] != 'ok' or sorted(r['registered']) != sorted(r['ids'])}
    assert not missing and not bad, f'the smoke reproduction in {out} is incomplete: not run {missing}, failed {bad}'
    return out


@pytest.fixture(scope='session')
def smoke(tmp_path_factory):
    """`cosine-pitfalls reproduce --profile smoke` of every section (every cell of the six section notebooks through
    papermill, their pages and the report), run once per `make test` and read by the tests of the CLI, the report
    and the pages: `make smoke` writes it before pytest starts and names it in $COSINE_PITFALLS_SMOKE; a pytest
    started without it runs it here, once for all xdist workers (the first takes a lock, the others wait and read).
    Returns (folder, the run's stderr). Read only: a test that changes it works on `smoke_copy`."""
    import fcntl
    given = os.environ.get(SMOKE_ENV)
    if given:
        out = Path(given).resolve()
        log = out.with_name(out.name + '.log')
        assert (out/'manifest.json').exists() and log.exists(), f'${SMOKE_ENV}={given}: no smoke reproduction there'
        return _smoke_checked(out), log.read_text()
    # under xdist each worker's basetemp is a folder of the session's, shared by its workers; without xdist the
    # session's own basetemp (its parent is shared by every pytest session of this user: a smoke of older code)
    base = tmp_path_factory.getbasetemp()
    root = base.parent if os.environ.get('PYTEST_XDIST_WORKER') else base
    out, log = root/'smoke', root/'smoke.log'
    with open(root/'smoke.lock', 'w') as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not log.exists():
            r = run_cli('reproduce', '--profile', 'smoke', '--out', out, '--quiet', timeout=1800)
            assert r.returncode == 0, r.stderr[-5000:]
            log.write_text(r.stderr)
    return _smoke_checked(out), log.read_text()


@pytest.fixture
def smoke_copy(smoke, tmp_path):
    "A copy of the shared smoke reproduction that a test may change (rerun, damage, interrupt)."
    import shutil
    out = tmp_path/'smoke'
    shutil.copytree(smoke[0], out, symlinks=True)
    return out


BREAKS = ('holm', 'testability', 'controls')


@pytest.fixture(autouse=True)
def _broken_gate(request, monkeypatch):
    """With COSINE_PITFALLS_BREAK_GATE set, the null tests (test_null_*.py) judge through a broken copy of the rule:
    'holm' (every part at the claim's level), 'testability' (any part may say differ: no paper effect, detectable
    effect, headroom or margin's source needed), 'controls' (a control of ours decides like a part). Unset: nothing.
    tools/break_gate.py runs them so, to show which break each test catches."""
    brk = os.environ.get('COSINE_PITFALLS_BREAK_GATE', '')
    if not brk or not request.module.__name__.startswith('test_null'):
        yield; return
    if brk not in BREAKS: raise pytest.UsageError(f'COSINE_PITFALLS_BREAK_GATE must be one of {BREAKS}; got {brk!r}')
    from cosine_pitfalls.repro import verdicts as V
    if brk == 'holm': monkeypatch.setattr(V, 'holm', lambda ps, alpha=V.ALPHA: [alpha] * len(list(ps)))
    if brk == 'testability':
        monkeypatch.setattr(V, '_why_untestable', lambda *a, **k: '')
        monkeypatch.setattr(V, '_why_unresolved', lambda *a, **k: '')
    if brk == 'controls': monkeypatch.setattr(V.Shown, '__new__', staticmethod(lambda cls, part: part))
    yield
