"The training engine through the installed CLI: a run's files, bad configs, a killed run resumed bit for bit, torchrun."
import os, random, signal, subprocess, sys, time
from pathlib import Path

import pytest
import torch

from conftest import CLI, run_cli, run_main
from cosine_pitfalls.utils import read_nc

SMALL = ['--dataset', 'digits', '--batch-size', '64', '--head-width', '32', '--head-out', '16', '--width', '8',
         '--eval-every', '0', '--diag-samples', '64', '--knn-k', '20', '--threads', '1', '--no-show-progress']


def test_train_cli_writes_the_run(tmp_path):
    out = tmp_path/'run'
    r = run_cli('train', '--method', 'simclr', '--epochs', '2', '--steps-per-epoch', '4', *SMALL, '--out', out)
    assert r.returncode == 0, r.stderr
    assert 'status ok' in r.stdout and 'scikit-learn digits' in r.stdout
    ds = read_nc(out/'run.nc')
    assert ds.sizes['epoch'] == 2 and ds.attrs['method'] == 'simclr' and 0 < ds.attrs['final_knn_top1'] <= 1
    for v in ('loss', 'z_norm_mean', 'pos_obtuse_share', 'neg_cos_var', 'z_erank', 'r_spectrum', 'lr'): assert v in ds
    assert (out/'config.json').exists() and (out/'checkpoint.pt').exists()


BAD = [
    (['--method', 'simclrr'], "method must be one of 'simclr'"),
    (['--lr', '-1'], 'lr must be a positive finite number'),
    (['--epochs', '0'], 'epochs must be an integer >= 1'),
    (['--momentum', '1.5'], 'momentum must be a number in [0, 1)'),
    (['--dataset', 'cifar10', '--data-root', '/no/such/data'], "/no/such/data"),
    (['--method', 'directclr'], 'd0 must be set for method directclr'),
    (['--optimizer', 'adam'], "optimizer must be one of 'sgd', 'lars', 'adamw'"),
]


@pytest.mark.parametrize('k,args,msg', [(k, *b) for k, b in enumerate(BAD)], ids=[' '.join(a) for a, _ in BAD])
def test_bad_train_config_is_one_line(tmp_path, k, args, msg):
    """The first through the installed console script (~3 s: it loads torch), the rest through its `main` in this
    process, except the missing data folder: the trainer finds it when it loads the data (`run_main` stops at that)."""
    out = tmp_path/'never'
    r = (run_cli if k == 0 or '--data-root' in args else run_main)('train', *args, '--out', out, '--no-show-progress')
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert msg in r.stderr and 'Traceback' not in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert not out.exists()


def _weights(d: Path) -> dict:
    return torch.load(d/'checkpoint.pt', weights_only=False)['model']


def test_killed_run_resumes_to_identical_weights(tmp_path):
    "SIGKILL at a random step after the first checkpoint; the rerun ends with the uninterrupted run's weights, bit for bit."
    args = ['--method', 'byol', '--epochs', '10', '--steps-per-epoch', '8', '--checkpoint-every', '1', *SMALL]
    a, b = tmp_path/'a', tmp_path/'b'
    r = run_cli('train', *args, '--out', a)
    assert r.returncode == 0, r.stderr
    p = subprocess.Popen([str(CLI), 'train', *args, '--out', str(b)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                         start_new_session=True)
    t0 = time.time()
    while not (b/'checkpoint.pt').exists() and p.poll() is None and time.time() - t0 < 300: time.sleep(0.02)
    time.sleep(random.uniform(0.0, 0.3))                                  # somewhere in a later epoch (of 9 left)
    assert p.poll() is None, 'the run finished before it could be killed'
    os.killpg(p.pid, signal.SIGKILL); p.wait(timeout=60)
    assert not (b/'run.nc').exists()
    r = run_cli('train', *args, '--out', b)
    assert r.returncode == 0, r.stderr
    wa, wb = _weights(a), _weights(b)
    assert wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)


def test_torchrun_two_gloo_processes(tmp_path):
    "The same command under torchrun trains with DDP on CPU (gloo); only rank 0 writes."
    torchrun = Path(sys.executable).parent/'torchrun'
    out = tmp_path/'ddp'
    env = dict(os.environ, OMP_NUM_THREADS='1')
    r = subprocess.run([str(torchrun), '--nproc_per_node', '2', '--master_port', str(29500 + os.getpid() % 1000),
                        '-m', 'cosine_pitfalls.train', '--method', 'simclr', '--epochs', '1', '--steps-per-epoch', '3',
                        *SMALL, '--batch-size', '32', '--out', str(out)], capture_output=True, text=True, timeout=600, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    ds = read_nc(out/'run.nc')
    assert ds.attrs['world_size'] == 2 and ds.sizes['epoch'] == 1
    assert r.stdout.count('status ok') == 1                              # rank 0 prints, rank 1 does not
