"""`reproduce --train-only` through submitit (repro.shards): the runs equal those the notebooks' own sweeps trained in
the smoke reproduction; submitting again sends nothing; a shard cancelled mid-run and submitted again resumes bit for
bit; the sbatch script sent to Slurm (a stub `sbatch` that records it); a run of several GPUs as one job of two
local tasks (DDP over gloo), equal to torchrun's."""
import os, stat, time
from pathlib import Path

import pytest
import xarray as xr

from conftest import run_main
from cosine_pitfalls.utils import read_nc

pytest.importorskip('submitit')

SECTION4 = ['-p', 'settings=none,directclr', '-p', 'n_seeds=1']


def datasets(folder: Path) -> dict:
    "run id -> its run.nc without timings and attrs (times, dates), under a reproduction's training/04_directclr."
    out = {}
    for f in sorted((folder/'training'/'04_directclr'/'runs').glob('*/run.nc')):
        ds = read_nc(f)
        out[f.parent.name] = ds.drop_vars([v for v in ds.data_vars if 'second' in v]).drop_attrs()
    return out


def test_local_executor_trains_the_notebooks_runs_and_sends_nothing_twice(cli, smoke, tmp_path):
    out = tmp_path/'out'
    r = cli('reproduce', '--profile', 'smoke', '--section', '4', *SECTION4, '--train-only', '--executor', 'local',
            '--gpus', '1', '--per-gpu', '2', '--out', out)                      # K = 2 at once; the notebook: one
    assert r.returncode == 0, r.stderr[-3000:] + r.stdout[-2000:]
    assert 'submitted 1 shard(s) of 2 runs (local; 2 at a time' in r.stdout, r.stdout
    mine, theirs = datasets(out), datasets(smoke[0])
    assert len(mine) == 2 and set(mine) <= set(theirs), (sorted(mine), sorted(theirs))
    for rid, ds in mine.items(): xr.testing.assert_identical(ds, theirs[rid])   # the notebook's own sweep, bit for bit
    jobs = sorted((out/'slurm').iterdir())
    r = cli('reproduce', '--profile', 'smoke', '--section', '4', *SECTION4, '--train-only', '--executor', 'local',
            '--out', out)
    assert r.returncode == 0 and 'nothing to train' in r.stdout, r.stdout + r.stderr[-2000:]
    assert sorted((out/'slurm').iterdir()) == jobs                                 # no job sent


def test_cancelled_shard_resubmitted_resumes_bit_for_bit(tmp_path):
    from cosine_pitfalls.repro.pins import kernel_env
    from cosine_pitfalls.repro.shards import submit, training_runs
    # 40 epochs of 3 steps: the cancel lands within the 39 left after the first checkpoint (with 4 and with 7 epochs of 6
    # steps, a loaded machine let the run finish before the cancel arrived; an epoch's time is mostly its measurements)
    req = dict(profile='smoke', only=['directclr.table1'], overrides=['settings=none', 'n_seeds=1', 'epochs=40',
                                                                      'steps_per_epoch=3'])
    send = lambda runs, out: submit(runs, out, 'local', env=kernel_env('smoke'), profile='smoke', log=lambda s: None)
    straight, out = tmp_path/'straight', tmp_path/'cut'
    runs = training_runs(**req, out=out, price=False)
    assert len(runs) == 1
    run_dir = Path(runs[0].kw['out_dir'])
    whole, = send(training_runs(**req, out=straight, price=False), straight)     # the same run, not interrupted
    job, = send(runs, out)
    t0 = time.time()
    while not (run_dir/'checkpoint.pt').exists() and time.time() - t0 < 120: time.sleep(0.02)
    job.cancel(); job.wait()
    assert (run_dir/'checkpoint.pt').exists() and not (run_dir/'run.nc').exists(), 'not cancelled mid-run'
    from cosine_pitfalls.train import read_checkpoint
    st = read_checkpoint(run_dir/'checkpoint.pt')             # the epochs done before the cancel, with their timings
    done = {h['epoch']: h['epoch_seconds'] for h in st['history'] if h['epoch'] > 0}
    assert 1 <= st['epoch'] < 40 and len(done) == st['epoch']
    again = training_runs(**req, out=out, price=False)
    assert [r.kw['out_dir'] for r in again] == [str(run_dir)]                      # the interrupted run, again
    job, = send(again, out)
    job.results(); whole.results()
    a, b = datasets(straight), datasets(out)
    assert list(a) == list(b) == [run_dir.name]
    xr.testing.assert_identical(a[run_dir.name], b[run_dir.name])
    ds = read_nc(run_dir/'run.nc')   # resumed, not restarted: those epochs' own timings
    assert [float(ds.epoch_seconds.sel(epoch=e)) for e in done] == list(done.values())


@pytest.fixture
def stub_sbatch(tmp_path, monkeypatch):
    "An `sbatch` that keeps the script it is given and answers as Slurm does."
    bin_ = tmp_path/'bin'; bin_.mkdir(); log = tmp_path/'sbatch.log'
    f = bin_/'sbatch'
    f.write_text(f'#!/bin/sh\nfor a in "$@"; do :; done\ncat "$a" >> {log}\necho "ARGS $*" >> {log}\n'
                 'echo "Submitted batch job 4242"\n')
    f.chmod(f.stat().st_mode | stat.S_IEXEC)
    srun = bin_/'srun'; srun.write_text('#!/bin/sh\nexit 1\n'); srun.chmod(0o755)   # submitit looks for it
    monkeypatch.setenv('PATH', f'{bin_}{os.pathsep}{os.environ["PATH"]}')
    return log


def test_sbatch_script_of_the_shards(stub_sbatch, tmp_path):
    r = run_main('reproduce', '--profile', 'smoke', '--section', '4', *SECTION4, '--train-only', '--executor', 'slurm',
            '--gpus', '2', '--per-gpu', '3', '--slurm', 'partition=gpu', '--slurm', 'account=ssl', '--out',
            tmp_path/'out')
    assert r.returncode == 0, r.stderr[-3000:]
    assert 'submitted 2 shard(s) of 2 runs (slurm; 3 at a time' in r.stdout and 'jobs 4242_0, 4242_1' in r.stdout, r.stdout
    assert 'cosine-pitfalls reproduce --profile smoke --out' in r.stdout               # what to run afterwards
    script = stub_sbatch.read_text()
    for line in ('#SBATCH --array=0-1%2', '#SBATCH --partition=gpu', '#SBATCH --account=ssl',
                 '#SBATCH --gpus-per-node=1', '#SBATCH --cpus-per-task=4', '#SBATCH --ntasks-per-node=1',
                 '#SBATCH --job-name=cosine-pitfalls-smoke', '#SBATCH --signal=USR2@', 'submitit.core._submit'):
        assert line in script, (line, script)
    assert '#SBATCH --time=' in script


def test_a_run_of_several_gpus_is_one_ddp_job(stub_sbatch, tmp_path):
    from cosine_pitfalls.repro.shards import Run, submit
    jobs = submit([Run('paper[x=1]', dict(out_dir=str(tmp_path/'r')), 3600.0, 600.0, gpus=4)], tmp_path/'out', 'slurm',
                  gpus=8, log=lambda s: None)
    assert [j.job_id for j in jobs] == ['4242']
    script = stub_sbatch.read_text()
    assert '#SBATCH --ntasks-per-node=4' in script and '#SBATCH --gpus-per-node=4' in script, script
    assert '--array' not in script


def test_bad_requests_are_refused_before_anything(tmp_path):
    for args, msg in ((['--executor', 'slurm'], '--executor applies to --train-only'),
                      (['--train-only', '--executor', 'cluster'], 'executor must be one of'),
                      (['--train-only', '--per-gpu', '0'], '--per-gpu must be >= 1'),
                      (['--train-only', '--slurm', 'partition=gpu'], 'slurm: --slurm applies to --executor slurm or local'),
                      (['--train-only', '--executor', 'slurm', '--slurm', 'partition'], 'slurm: give KEY=VALUE'),
                      (['--price', '--train-only'], 'give one of --preflight, --price, --train-only')):
        r = run_main('reproduce', '--profile', 'smoke', '--section', '4', *args, '--out', tmp_path/'o')
        assert r.returncode == 2 and msg in r.stderr, (args, r.stderr)
        assert not (tmp_path/'o'/'training').exists()


def test_a_ddp_job_of_two_local_tasks_trains_as_torchrun_does(tmp_path, monkeypatch):
    """A run of several GPUs sent as one job of N tasks (`DDPTask`) through submitit's local executor, two tasks on the
    CPU (gloo): the job trains it once, in a group of two, and its dataset is bit for bit the one `--executor here`'s
    torchrun path trains (`python -m torch.distributed.run ... -m cosine_pitfalls.repro.shards RUN.json`). It is sent
    from a shell with a stale group in its environment (Slurm passes the submitting shell's variables on): the job's
    own rank and group win."""
    import json, subprocess, sys
    from cosine_pitfalls.repro.pins import kernel_env
    from cosine_pitfalls.repro.shards import Run, submit, training_runs
    req = dict(profile='smoke', only=['directclr.table1'], overrides=['settings=none', 'n_seeds=1', 'epochs=2',
                                                                      'steps_per_epoch=3'])
    job_out, run_out = tmp_path/'job', tmp_path/'torchrun'
    r, = training_runs(**req, out=job_out, price=False)
    stale = dict(MASTER_ADDR='10.255.255.1', MASTER_PORT='1', RANK='3', WORLD_SIZE='7')
    clean = {k: v for k, v in os.environ.items() if k not in stale}  # the torchrun reference: its own group
    for k, v in stale.items():
        monkeypatch.setenv(k, v)                                    # a stale group in the sending shell
    logs = []
    job, = submit([Run(r.name, r.kw, 1.0, 1.0, gpus=2)], job_out, 'local', env=kernel_env('smoke'), profile='smoke',
                  log=logs.append)
    assert logs == [f'submitted {r.name} as one job of 2 tasks (DDP)'], logs
    t, = training_runs(**req, out=run_out, price=False)          # the torchrun path, meanwhile (its own folder)
    f = tmp_path/'run.json'; f.write_text(json.dumps(t.kw))
    p = subprocess.Popen([sys.executable, '-m', 'torch.distributed.run', '--standalone', '--nproc-per-node=2',
                          '-m', 'cosine_pitfalls.repro.shards', str(f)], env={**clean, **kernel_env('smoke')},
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert job.results() == [r.kw['out_dir']] * 2                   # two tasks, each ended in the trainer
    _, err = p.communicate(timeout=600)
    monkeypatch.undo()
    assert p.returncode == 0, err[-3000:]
    a, b = datasets(job_out), datasets(run_out)
    assert list(a) == list(b) == [Path(r.kw['out_dir']).name]
    xr.testing.assert_identical(a[Path(r.kw['out_dir']).name], b[Path(r.kw['out_dir']).name])
    for folder in (job_out, run_out):
        ds = read_nc(next((folder/'training'/'04_directclr'/'runs').glob('*/run.nc')))
        assert ds.attrs['world_size'] == 2 and ds.sizes['epoch'] == 3, ds.attrs
