"""The same numbers on any machine of this kind (issue 25): a short training under the `cpu` profile's pins ends with
the weights recorded in the repository for its instruction set.

What it guards: the `cpu` profile's verdicts must come out the same on this machine and on CI's. The runner pins
every kernel of the CPU profiles to one thread and to AVX2 (`repro.execute.kernel_env`); this test trains 20 steps of SimCLR
on the digits in a fresh process started with exactly those variables, hashes the final weights (sha256 over the
state_dict's tensors, by name) and compares the hash with `tests/reproducible_hashes.json` under the instruction set
the process ran and the CPU's vendor (torch's CPU capability, e.g. 'AVX2 AMD'). On another machine with the same
instruction set and vendor — an AVX-512 CPU of that vendor pinned to AVX2 included — a different hash means the
numbers moved: a pin that does not hold there (oneDNN blocking by cache size), or a change to the trainer, the data
or torch. The test then fails and says which; where the change is intended, record the new value:

    python tests/test_reproducible.py --record

Where nothing is recorded for this machine's instruction set and vendor (a CPU without AVX2, another vendor, whose
BLAS takes its own paths whatever the pins: unverified), the test is skipped and says why. One process and one thread are bit-deterministic here (two runs, one hash; see `--check`).
"""
import datetime, hashlib, json, os, subprocess, sys, tempfile
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
RECORDED = HERE/'reproducible_hashes.json'
RUN = dict(method='simclr', dataset='digits', backbone='small_cnn', width=32, image_size=8, batch_size=128,
           head_width=128, head_out=64, optimizer='sgd', lr=0.3, momentum=0.9, weight_decay=5e-4,
           epochs=2, steps_per_epoch=10, eval_every=0, diag_samples=64, seed=0, threads=1, show_progress=False,
           device='cpu')   # the cpu profile's SimCLR settings (section 5), 20 steps


def weights_sha256(state: dict) -> str:
    "sha256 over a state_dict's tensors (name, dtype, shape, bytes as stored), in the order of their names."
    import torch
    h = hashlib.sha256()
    for k in sorted(state):
        t = state[k].detach().cpu().contiguous()
        h.update(f'{k}:{t.dtype}:{tuple(t.shape)}\0'.encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def _child() -> dict:
    "Train RUN in this process; its final weights' hash, loss and what it computed with."
    from cosine_pitfalls.repro.execute import compute_environment
    from cosine_pitfalls.train import CHECKPOINT, TrainConfig, read_checkpoint, train
    with tempfile.TemporaryDirectory() as d:
        ds = train(TrainConfig(**RUN, out_dir=d))
        state = read_checkpoint(Path(d)/CHECKPOINT)['model']
    return dict(sha256=weights_sha256(state), loss=float(ds['loss'][-1]), environment=compute_environment())


def short_run(pinned: bool = True) -> dict:
    "RUN in a fresh process, under the `cpu` profile's pins (or with the CPU's best instruction set, one thread)."
    from cosine_pitfalls.repro.pins import PIN_ISA, PIN_THREADS, kernel_env
    env = {k: v for k, v in os.environ.items() if k not in PIN_ISA}
    env.update(kernel_env('cpu') if pinned else PIN_THREADS)
    r = subprocess.run([sys.executable, __file__, '--child'], env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(next(l for l in r.stdout.splitlines() if l.startswith('@@'))[2:])


def test_short_run_ends_with_the_recorded_weights():
    from conftest import isa_key
    got = short_run()
    env = got['environment']
    isa, recorded = isa_key(env), json.loads(RECORDED.read_text())
    if isa not in recorded:
        pytest.skip(f"no weights recorded for instruction set {isa} ({env['cpu']}; recorded: "
                    f"{', '.join(k for k in recorded if not k.startswith('_'))}): nothing to compare; record one with "
                    f"`python tests/test_reproducible.py --record`")
    want = recorded[isa]
    assert got['sha256'] == want['sha256'], (
        f"the short run's weights moved: sha256 {got['sha256'][:16]}… (loss {got['loss']:.9g}) here, "
        f"{want['sha256'][:16]}… (loss {want['loss']:.9g}) recorded for {isa}. Recorded with torch {want['torch']}, "
        f"numpy {want['numpy']}, Python {want['python']} on {want['cpu']} (oneDNN {want['onednn_isa']}); here torch "
        f"{env['torch']}, numpy {env['numpy']}, Python {env['python']} on {env['cpu']} (oneDNN {env['onednn_isa']}), "
        f"{env['threads']} thread(s). The cpu profile's numbers would differ from the recorded machine's: find "
        f"what moved them; if the change is intended, record the new value (python tests/test_reproducible.py "
        f"--record)")


def record() -> None:
    "Run the short run pinned, twice (they must agree), and record its hash under its instruction set."
    from conftest import isa_key    # not at the top: conftest pins whoever imports it, and --check's children differ
    a, b = short_run(), short_run()
    assert a['sha256'] == b['sha256'], 'two runs in this machine gave two hashes: not deterministic, nothing recorded'
    env = a['environment']
    rec = json.loads(RECORDED.read_text()) if RECORDED.exists() else {}
    rec[isa_key(env)] = dict(sha256=a['sha256'], loss=a['loss'], onednn_isa=env['onednn_isa'],
                           openblas=env['openblas'], torch=env['torch'], numpy=env['numpy'], python=env['python'],
                           cpu=env['cpu'], cores=env['cores'], pinned=env['pinned'],
                           recorded=datetime.date.today().isoformat())
    RECORDED.write_text(json.dumps(rec, indent=1, ensure_ascii=False) + '\n')
    print(f"recorded {isa_key(env)}: {a['sha256']} (loss {a['loss']:.9g})")


def check() -> None:
    "Two pinned runs and one with this CPU's best instruction set: print their hashes."
    for name, pinned in (('pinned', True), ('pinned again', True), ("this CPU's best", False)):
        r = short_run(pinned)
        print(f"{name:16s} {r['environment']['isa']:8s} oneDNN {r['environment']['onednn_isa']:14s} "
              f"{r['sha256']} loss {r['loss']:.9g}")


if __name__ == '__main__':
    if '--child' in sys.argv: print('@@' + json.dumps(_child()))
    elif '--record' in sys.argv: record()
    elif '--check' in sys.argv: check()
    else: sys.exit('usage: python tests/test_reproducible.py --record | --check')
