"""Faults (issue 19): nothing finished is lost, nothing runs that should not. One test (or group) per point:
1 interrupts, 2 two runners on one folder, 3 a train folder of another run, 4 damaged result files, 5 checkpoints
that cannot execute code (and issue 20.1: resuming a checkpoint saved on another device), 6 trust, 7 values
checked before any kernel, 8 unusable folders and damaged files, 9 the smaller ones."""
import json, os, pickle, shutil, signal, subprocess, sys, time
from pathlib import Path

import pytest
import torch

from conftest import CLI, NBS, read_json, run_cli, run_main, tree


ONE = ['reproduce', '--profile', 'smoke', '--only', 'clop.thm1', '--quiet']
SMALL = ['--dataset', 'digits', '--batch-size', '64', '--head-width', '32', '--head-out', '16', '--width', '8',
         '--eval-every', '0', '--diag-samples', '64', '--knn-k', '20', '--threads', '1', '--no-show-progress']
FINAL, PAGE = Path('runs/01_gradients.smoke.ipynb'), Path('notebooks/01_gradients.smoke.html')


def sigint_default():
    """`preexec_fn` of a child that a test interrupts with SIGINT: the signal at its default disposition, so the test
    tests the program, not the shell that started pytest (a POSIX shell starts a background job with SIGINT ignored,
    an ignored signal stays ignored across exec, and Python then installs no KeyboardInterrupt handler)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_children_start_with_sigint_at_default():
    "Even where pytest itself runs with SIGINT ignored (a background job), the children the tests interrupt do not."
    probe = 'import signal; print(signal.getsignal(signal.SIGINT) is signal.default_int_handler)'
    old = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        run = lambda **kw: subprocess.run([sys.executable, '-c', probe], capture_output=True, text=True, **kw).stdout
        assert run().strip() == 'False'                                   # inherited: ignored, no KeyboardInterrupt
        assert run(preexec_fn=sigint_default).strip() == 'True'
    finally: signal.signal(signal.SIGINT, old)


def _wait(cond, timeout=300, p=None):
    t0 = time.time()
    while not cond() and time.time() - t0 < timeout and (p is None or p.poll() is None): time.sleep(0.05)
    return cond()


# 1. an interrupted notebook never replaces a finished one, and leaves nothing partial
@pytest.mark.parametrize('how', ['SIGINT to the group', 'SIGTERM'])
def test_interrupt_keeps_the_finished_notebook_and_page(smoke_copy, how):
    "(It holds the assertions of test_cli_runs.py's former test_interrupted_run_leaves_no_partial_file too.)"
    out = smoke_copy                                       # the shared smoke reproduction (`conftest.smoke`), copied
    keep = {p: (out/p).read_bytes() for p in (FINAL, PAGE)}
    report = (out/'report.md').read_bytes()
    runs0 = len(read_json(out/'manifest.json')['runs'])
    p = subprocess.Popen([str(CLI), *ONE, '--force', '--out', str(out)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                         preexec_fn=sigint_default)
    try:
        assert _wait(lambda: list((out/'runs').glob('.*running*')), p=p), 'the notebook never started'
        time.sleep(3)                                                          # a few cells in
        if how == 'SIGTERM': p.send_signal(signal.SIGTERM)
        else: os.killpg(p.pid, signal.SIGINT)
        _, err = p.communicate(timeout=120)
    finally:                                                                   # a failed test leaves no run behind
        if p.poll() is None: os.killpg(p.pid, signal.SIGKILL); p.wait()
    assert p.returncode == 130 and 'interrupted' in err, err
    for f, b in keep.items(): assert (out/f).read_bytes() == b, f'{f} changed'
    # nothing partial: no temporary left, every file of the runner whole, the report as it was
    import xarray as xr
    from PIL import Image
    assert [f for f in out.rglob('*') if '.tmp' in f.name or '.running' in f.name] == []
    for f in [*(out/'results').glob('*.json'), out/'manifest.json']: json.loads(f.read_text())
    for f in (out/'results').glob('*.nc'): xr.load_dataset(f, engine='h5netcdf')
    for f in (out/'figures').glob('*.png'): Image.open(f).verify()
    assert (out/'report.md').read_bytes() == report
    assert (out/'runs'/'01_gradients.smoke.interrupted.ipynb').exists()
    assert 'kept as runs/01_gradients.smoke.interrupted.ipynb' in err
    m = read_json(out/'manifest.json')
    assert len(m['runs']) == runs0 + 1 and m['runs'][-1]['status'] == 'interrupted'
    assert m['results']['clop.thm1']['status'] == 'ok'              # the finished result stands
    r = run_main('report', '--out', out)
    assert r.returncode == 0 and (out/PAGE).read_bytes() == keep[PAGE]
    assert not (out/'notebooks'/'01_gradients.smoke.interrupted.html').exists()


# 2. one runner per output folder
def test_second_runner_on_one_folder_is_refused_at_once(smoke_copy):
    out = smoke_copy
    p = subprocess.Popen([str(CLI), *ONE, '--force', '--out', str(out)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert _wait(lambda: list((out/'runs').glob('.*running*')), p=p), 'the first run never started'
    before = (out/'manifest.json').read_bytes()
    for cmd in (ONE, ['report']):
        t0 = time.time()
        r = run_cli(*cmd, '--out', out)
        assert r.returncode == 2 and time.time() - t0 < 120, r.stderr   # ~5 s on an idle machine
        assert f'is in use by pid {p.pid} (reproduce --profile smoke)' in r.stderr and 'Traceback' not in r.stderr
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert (out/'manifest.json').read_bytes() == before
    _, err = p.communicate(timeout=600)
    assert p.returncode == 0, err
    assert read_json(out/'manifest.json')['runs'][-1]['status'] == 'ok'


# 3. a train folder that holds another run
def test_train_folder_of_another_run_is_refused(tmp_path):
    out = tmp_path/'run'
    r = run_cli('train', '--method', 'simclr', '--epochs', '1', '--steps-per-epoch', '2', *SMALL, '--out', out)
    assert r.returncode == 0, r.stderr
    before, rid = tree(out), read_json(out/'config.json')['run_id']
    t0 = time.time()
    r = run_cli('train', '--method', 'byol', '--epochs', '1', '--steps-per-epoch', '2', *SMALL, '--out', out)
    assert r.returncode == 2 and f'of run {rid}' in r.stderr and 'this is run ' in r.stderr, r.stderr
    assert "fields that differ: method 'simclr' → 'byol'" in r.stderr, r.stderr        # issue 28: not hashes only
    assert 'fresh --out' in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert tree(out) == before and time.time() - t0 < 60


# 4. "done" means every file opens
def test_damaged_result_files_are_recomputed(smoke_copy):
    "A result whose .nc is cut short and one whose .nc is gone: one rerun recomputes both, saying why for each."
    import xarray as xr
    out = smoke_copy
    damage = {'clop.thm1': 'open', 'clop.lemma1': 'missing'}               # the result -> what the reason says
    nc = {i: out/'results'/f'{i}.nc' for i in damage}
    nc['clop.thm1'].write_bytes(nc['clop.thm1'].read_bytes()[:nc['clop.thm1'].stat().st_size // 2])
    nc['clop.lemma1'].unlink()
    runs0 = len(read_json(out/'manifest.json')['runs'])
    r = run_cli('reproduce', '--profile', 'smoke', '--only', *damage, '--quiet', '--out', out)
    assert r.returncode == 0, r.stderr
    m = read_json(out/'manifest.json')
    assert len(m['runs']) == runs0 + 1 and sorted(m['runs'][-1]['ids']) == sorted(damage)
    for i, word in damage.items():
        xr.load_dataset(nc[i], engine='h5netcdf')
        why = m['results'][i]['recomputed_because']
        assert why.startswith(f'results/{i}.nc ') and word in why, (i, why)


@pytest.mark.parametrize('damage', ['truncate', 'delete a table'])
def test_list_and_report_notice_a_damaged_result(smoke_copy, damage):
    """`list` and `report` check "done" as `reproduce` does (issue 28): a result whose file is cut short or gone is
    listed as damaged, naming the file; `report` shows the row as damaged, says why, and exits 1."""
    out = smoke_copy
    if damage == 'truncate': os.truncate(out/'results'/'clop.thm1.nc', 3000); bad = 'results/clop.thm1.nc does not open'
    else: (out/'tables'/'clop.thm1.csv').unlink(); bad = 'tables/clop.thm1.csv missing'
    r = run_main('list', '--out', out)
    row = next(l for l in r.stdout.splitlines() if l.startswith('clop.thm1 '))
    assert r.returncode == 0 and f'damaged ({bad}' in row, (r.stderr, row)
    r = run_main('report', '--out', out)
    assert r.returncode == 1 and f'cosine-pitfalls: error: clop.thm1: damaged ({bad}' in r.stderr, r.stderr
    row = next(l for l in (out/'report.md').read_text().splitlines() if l.startswith('| `clop.thm1`'))
    assert '| damaged |' in row and bad in row, row


def test_a_page_that_cannot_be_written_is_an_error(smoke_copy):
    """A full disk when a notebook's page is written (here: its place taken by a folder, so writing it fails):
    `reproduce` and `report` write the rest, say which page is missing, and exit 1 (issue 28: they exited 0)."""
    out = smoke_copy
    (out/PAGE).unlink(); (out/PAGE).mkdir(); os.utime(out/PAGE, (0, 0))   # older than its notebook
    for cmd in (ONE, ['report']):
        r = run_main(*cmd, '--out', out)
        assert r.returncode == 1 and f'cosine-pitfalls: error: {PAGE} not written (' in r.stderr, r.stderr
        assert 'Traceback' not in r.stderr and (out/'report.md').exists()


def test_refusals_before_the_folder_is_touched(tmp_path):
    "`list --out FILE` and `report --nbs /nonexistent` are refused, and the output folder is left as it was."
    f = tmp_path/'afile'; f.write_text('x')
    r = run_main('list', '--out', f)
    assert r.returncode == 2 and f"out: '{f}' is not a folder" in r.stderr and r.stdout == '', (r.stdout, r.stderr)
    out = tmp_path/'out'; out.mkdir(); (out/'manifest.json').write_text('{"results": {}}'); before = tree(out)
    r = run_main('report', '--out', out, '--nbs', '/nonexistent')
    assert r.returncode == 2 and "nbs: '/nonexistent' is not a folder" in r.stderr, r.stderr
    assert tree(out) == before and not (out/'.lock').exists()


# 5. checkpoints that cannot execute code
class _Evil:
    def __init__(self, marker): self.marker = marker
    def __reduce__(self): return (os.system, (f'touch {self.marker}',))


def test_planted_pickle_in_checkpoint_does_not_execute(tmp_path):
    out, marker = tmp_path/'run', tmp_path/'EXECUTED'
    out.mkdir()
    torch.save({'run_id': 'x', 'model': _Evil(marker)}, out/'checkpoint.pt')
    assert not marker.exists()
    r = run_cli('train', '--method', 'simclr', '--epochs', '1', '--steps-per-epoch', '2', *SMALL, '--out', out)
    assert not marker.exists(), 'the checkpoint executed code'
    assert r.returncode == 2 and 'checkpoint.pt: not a readable checkpoint of this trainer' in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and 'Traceback' not in r.stderr, r.stderr
    from cosine_pitfalls.train import load_model
    from dataclasses import asdict
    (out/'config.json').write_text(json.dumps(dict(run_id='x', **asdict(_tiny('')))))
    with pytest.raises(ValueError, match='not a readable checkpoint'): load_model(out)
    assert not marker.exists()


def _tiny(out, **kw):
    from cosine_pitfalls.train import TrainConfig
    return TrainConfig(**dict(method='simclr', epochs=3, steps_per_epoch=3, batch_size=64, head_width=32,
                              head_out=16, width=8, eval_every=0, diag_samples=64, knn_k=20, threads=1,
                              show_progress=False, out_dir=str(out)) | kw)


def test_checkpoint_saved_on_another_device_resumes_on_this_one(tmp_path, monkeypatch):
    "Issue 20.1: a checkpoint whose tensors carry CUDA location tags resumes here, on the CPU, bit for bit."
    from cosine_pitfalls.data import load_dataset
    from cosine_pitfalls.train import read_checkpoint, train
    digits = load_dataset('digits')
    a, b = tmp_path/'a', tmp_path/'b'
    train(_tiny(a), data=digits)
    train(_tiny(b), data=digits, stop_after=1)
    st = read_checkpoint(b/'checkpoint.pt')
    with monkeypatch.context() as m:                  # write it as a GPU process would: every storage on cuda:0
        m.setattr(torch.serialization, 'location_tag', lambda storage: 'cuda:0')
        torch.save(st, b/'checkpoint.pt')
    if not torch.cuda.is_available():                 # proof that the tags say CUDA
        with pytest.raises(RuntimeError, match='CUDA'): torch.load(b/'checkpoint.pt', weights_only=True)
    train(_tiny(b), data=digits)
    wa, wb = (read_checkpoint(d/'checkpoint.pt')['model'] for d in (a, b))
    assert all(torch.equal(wa[k], wb[k]) for k in wa)
    assert all(v.device.type == 'cpu' for v in wb.values())


def test_rng_state_with_more_or_fewer_saved_gpus_than_visible(monkeypatch):
    "Issue 20.1: CUDA RNG states saved for 2 GPUs restore on 1 visible GPU (and 1 saved on 2 visible)."
    from cosine_pitfalls import train as T
    gens = dict(data=torch.Generator().manual_seed(1))
    st = T.rng_state(gens)
    for k in list(st): assert k in ('gens', 'torch', 'cuda', 'python', 'numpy')
    torch.save(st, '/dev/null')                                  # plain types: weights_only loads them
    restored = []
    def set_state(s, device=0):
        if device >= visible: raise IndexError('list index out of range')    # what CUDA does
        assert s.device.type == 'cpu' and s.dtype == torch.uint8
        restored.append(device)
    monkeypatch.setattr(torch.cuda, 'is_available', lambda: True)
    monkeypatch.setattr(torch.cuda, 'device_count', lambda: visible)
    monkeypatch.setattr(torch.cuda, 'set_rng_state', set_state)
    for visible, saved, expect in ((1, 2, [0]), (2, 1, [0]), (2, 2, [0, 1])):
        restored.clear()
        T.set_rng_state(gens, dict(st, cuda=[torch.get_rng_state()] * saved))
        assert restored == expect, (visible, saved, restored)


# 6. trust only the package's own notebooks: test_cli_runs.py::test_failing_notebook_is_recorded_and_batch_goes_on


# 7. parameter values checked before any kernel, and a refused run touches nothing
BAD_VALUES = [
    (['--section', '4', '-p', 'epochs=-1'], 'epochs must be an integer >= 1'),
    (['--section', '4', '-p', 'dataset=mnist'], "dataset must be one of 'digits'"),
    (['--section', '4', '-p', 'optimizer=adam'], "optimizer must be one of 'sgd'"),
    (['--section', '4', '-p', 'batch_size=100000'], 'batch_size must not exceed the training set of digits'),
    (['--section', '4', '-p', 'backbone=resnet999'], "backbone must be one of"),
    (['--section', '4', '-p', 'epochs=1000000000'], 'epochs must be an integer >= 1 and <= 100000'),
    (['--only', 'clop.thm1', '-p', 'n_trials=0'], 'n_trials must be'),
    (['--only', 'clop.thm1', '-p', 'seed=-1'], 'parameter seed must be >= 0'),
    (['--only', 'clop.thm1', '-p', 'seed=99999999999999999999999'], 'parameter seed must be an integer of at most'),
    # sections 2 and 3 checked their values inside the kernel (issue 34.6): now before it, as section 1
    (['--section', '3', '-p', 'lr=1e30'], 'lr must be a number in (0, 1]; got 1e+30 (03_clop_synthetic.ipynb)'),
    (['--section', '2', '-p', 'n_pairs=1000000000000'], 'n_pairs must be an integer in 1 .. 10000000'),
    (['--section', '2', '-p', 'rho_max=-5.0'], 'rho_max must be a number in (1, 1000]; got -5.0'),
    (['--section', '2', '-p', 'n_pairs=10000000', '-p', 'pit_seeds=1000'], "pitfalls.fig2's 4 x 4 x 1000 x 10000000 pairs would take"),
    (['--section', '3', '-p', 'lambdas=abc'], "lambdas must be comma-separated numbers; got 'abc'"),
    (['--section', '3', '-p', 'temperature=0'], 'temperature must be a number in (0, 100]; got 0.0'),
    (['--section', '3', '-p', 'n_seeds=0'], 'n_seeds must be an integer in 1 .. 1000; got 0'),
    (['--section', '3', '-p', 'label_frac=5.0'], 'label_frac must be a number in (0, 1]; got 5.0'),
]


@pytest.mark.parametrize('k,args,msg', [(k, *b) for k, b in enumerate(BAD_VALUES)],
                         ids=[' '.join(a) for a, _ in BAD_VALUES])
def test_bad_value_is_refused_before_any_kernel(smoke_copy, k, args, msg):
    "The first through the console script; the others through its `main` here, where starting a kernel raises."
    out = smoke_copy
    before = tree(out)
    t0 = time.time()
    r = (run_cli if k == 0 else run_main)('reproduce', '--profile', 'smoke', *args, '--out', out, '--quiet')
    assert r.returncode == 2 and msg in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and 'Traceback' not in r.stderr, r.stderr
    assert time.time() - t0 < 120, 'a kernel ran'   # (~5 s idle; a kernel also leaves runs/ files)
    assert tree(out) == before


# 8. unusable folders and damaged files: one line naming them, before any compute
@pytest.mark.parametrize('where', ['a file', '/proc/x'])
def test_train_out_unusable_is_one_line_before_training(tmp_path, where):
    out = tmp_path/'file' if where == 'a file' else Path('/proc/x')
    if where == 'a file': out.write_text('x')
    t0 = time.time()
    r = (run_cli if where == 'a file' else run_main)('train', '--method', 'simclr', '--epochs', '30', *SMALL, '--out', out)
    assert r.returncode == 2 and 'out: ' in r.stderr and 'Traceback' not in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and time.time() - t0 < 60


@pytest.mark.parametrize('name,content', [('checkpoint.pt', b'PK\x03\x04 cut'), ('checkpoint.pt', b'\x80\x02}q'),
                                          ('run.nc', b'\x89HDF\r\n\x1a\n cut')])
def test_damaged_train_file_is_one_line(tmp_path, name, content):
    "The console script for the first; `main` in this process (training raises if reached) for the others."
    out = tmp_path/'run'; out.mkdir(); (out/name).write_bytes(content)
    r = (run_cli if name == 'checkpoint.pt' and content.startswith(b'PK') else run_main)('train', '--method', 'simclr', '--epochs', '1', '--steps-per-epoch', '2', *SMALL, '--out', out)
    assert r.returncode == 2 and str(out/name) in r.stderr and 'Traceback' not in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and 'delete it' in r.stderr


@pytest.mark.parametrize('text', ['{"results": {"clop', '"x"', '{"results": {"clop.thm1": "ok"}}'])
@pytest.mark.parametrize('cmd', [['list'], ['report'], ONE])
def test_damaged_manifest_is_one_line_naming_it(tmp_path, cmd, text):
    "Through the console script for one damage, through its `main` in this process for the others."
    out = tmp_path/'out'; out.mkdir(); (out/'manifest.json').write_text(text)
    before = tree(out)
    r = (run_cli if text == '"x"' else run_main)(*cmd, '--out', out)
    assert r.returncode == 2 and f"{out/'manifest.json'}: damaged" in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and 'Traceback' not in r.stderr and tree(out) == before


# 9. the smaller ones
@pytest.mark.parametrize('args,msg', [
    (['reproduce', '--profile', 'smoke', '--out', ''], "out: must name a folder; got ''"),
    (['list', '--out', ''], "out: must name a folder; got ''"),
    (['reproduce', '--profil', 'smoke'], 'unrecognized arguments: --profil smoke'),
    (['train', '--epoch', '3'], 'unrecognized arguments: --epoch 3'),
])
def test_small_refusals(tmp_path, args, msg):
    r = (run_cli if args[0] == 'train' else run_main)(*args, cwd=tmp_path)
    assert r.returncode == 2 and msg in r.stderr and os.listdir(tmp_path) == [], r.stderr
    assert len(r.stderr.strip().splitlines()) <= 2, r.stderr             # at most a short usage, then the error


def test_train_says_what_it_does_not_use(tmp_path):
    """Issue 34.6: `--checkpoint-every 0` with `--out` says that no checkpoint is written (a run it trains, then none
    on disk); `--data-root` for a dataset that reads no folder is refused before anything runs."""
    out = tmp_path/'run'
    r = run_cli('train', '--method', 'simclr', '--epochs', '1', '--steps-per-epoch', '2', '--checkpoint-every', '0',
                *SMALL, '--out', out)
    assert r.returncode == 0, r.stderr
    assert f'note: --checkpoint-every 0 writes no checkpoint to {out}' in r.stderr, r.stderr
    assert (out/'run.nc').exists() and not (out/'checkpoint.pt').exists()
    r = run_main('train', '--method', 'simclr', '--dataset', 'digits', '--data-root', '/nonexistent', *SMALL[2:],
                 '--out', tmp_path/'other')
    assert r.returncode == 2 and "data_root: digits reads no folder" in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and not (tmp_path/'other').exists()


def test_duplicates_are_run_once():
    from cosine_pitfalls.repro.plan import plan
    assert [j['ids'] for j in plan('smoke', only=['clop.thm1', 'clop.thm1'])] == [['clop.thm1']]
    jobs = plan('smoke', sections=[1, 1])
    assert len(jobs) == 1 and len(jobs[0]['ids']) == len(set(jobs[0]['ids']))


def test_list_into_a_closed_pipe_is_quiet(tmp_path):
    r = subprocess.run(f'"{CLI}" list --out "{tmp_path}" | head -1', shell=True, capture_output=True, text=True,
                       timeout=120)
    assert r.stdout.startswith('ID') and r.stderr == '', r.stderr


def test_train_ctrl_c_is_one_line_and_keeps_a_resumable_checkpoint(tmp_path):
    out = tmp_path/'run'; out.mkdir()
    stale = out/'.checkpoint.999999999.ab12cd34.tmp.pt'; stale.write_bytes(b'left by a killed run')
    args = ['--method', 'simclr', '--epochs', '100000', '--steps-per-epoch', '2', '--checkpoint-every', '1', *SMALL]
    p = subprocess.Popen([str(CLI), 'train', *args, '--out', str(out)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, preexec_fn=sigint_default)
    try:
        assert _wait(lambda: (out/'checkpoint.pt').exists(), p=p), 'no checkpoint was written'
        assert not stale.exists(), 'a leftover temporary checkpoint was not removed'
        time.sleep(1)
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=120)
    finally:                                                     # a failed test leaves no 100000-epoch run behind
        if p.poll() is None: p.kill(); p.wait()
    assert p.returncode == 130 and err.strip() == 'cosine-pitfalls train: interrupted; resume with the same command'
    from cosine_pitfalls.train import read_checkpoint
    st = read_checkpoint(out/'checkpoint.pt')
    assert st['epoch'] >= 1 and not [f for f in out.iterdir() if '.tmp' in f.name]
