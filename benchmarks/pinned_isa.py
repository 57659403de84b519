"""Benchmark: what pinning the CPU kernels to AVX2 costs against this machine's best (issue 25).

The `cpu` and `cpu-long` profiles start their kernels pinned (`runner.kernel_env`): one thread, and AVX2 kernels
(`ATEN_CPU_CAPABILITY=avx2`, `ONEDNN_MAX_CPU_ISA=AVX2`, `MKL_ENABLE_INSTRUCTIONS=AVX2`, `OPENBLAS_CORETYPE=Haswell`)
so that a run computes the same numbers on any machine with AVX2. This runs the same short training under each
setting, side by side in one run, each in a fresh process (torch reads the variables when it is imported):

- `best`: one thread, the CPU's best instruction set (no ISA variable set);
- `avx2`: exactly what the runner gives a `cpu` kernel;
- `default` (with `--no-simd`): `ATEN_CPU_CAPABILITY=default`, torch's kernels without SIMD: not a setting we use,
  it shows that the variable takes effect where `best` is AVX2 already.

The training: SimCLR on the digits at the `cpu` profile's settings of section 5 (small CNN of width 32, 8x8
images, batch 128, projector 128 -> 64, SGD lr 0.3), one thread. Each child trains a 1-epoch warm-up, then a 1-epoch
run and a (1 + `--epochs`)-epoch run (11 steps an epoch); the step cost is their difference per step, in wall time
of the training loop (`train_seconds`: what a run waits) and in the process's CPU time (what it computes; less moved
by other processes on a shared machine). Rounds alternate the settings (best, avx2, best, avx2, ...) so that such
load falls on each alike; a setting's figure is the median over rounds. Each child also hashes its final weights:
one setting gives one hash in every round (one process, one thread: bit for bit), and two settings give the same
hash only where they run the same kernels.

    python benchmarks/pinned_isa.py [--rounds 3] [--epochs 4] [--no-simd] [--out outputs/benchmarks]

prints a table and writes <out>/pinned_isa.json atomically.
"""
from __future__ import annotations

import argparse, datetime, hashlib, json, os, statistics, subprocess, sys, tempfile, time
from pathlib import Path

CPU_SIMCLR = dict(method='simclr', dataset='digits', backbone='small_cnn', width=32, image_size=8, batch_size=128,
                  head_width=128, head_out=64, optimizer='sgd', lr=0.3, momentum=0.9, weight_decay=5e-4,
                  steps_per_epoch=0, eval_every=0, diag_samples=64, seed=0, threads=1, show_progress=False,
                  device='cpu')


def weights_sha256(state: dict) -> str:
    "sha256 over a state_dict's tensors (name, dtype, shape, bytes), in the order of their names."
    import torch
    h = hashlib.sha256()
    for k in sorted(state):
        t = state[k].detach().cpu().contiguous()
        h.update(f'{k}:{t.dtype}:{tuple(t.shape)}\0'.encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())     # the bytes as stored, any dtype
    return h.hexdigest()


def child(epochs: int) -> dict:
    """Train in this process: a 1-epoch warm-up, then 1 epoch and 1 + `epochs` epochs; the step cost is the
    difference of the two (CPU time of this process, and the training loop's wall time), per step."""
    from cosine_pitfalls.data import load_dataset
    from cosine_pitfalls.repro.execute import compute_environment
    from cosine_pitfalls.train import CHECKPOINT, TrainConfig, read_checkpoint, train
    data = load_dataset('digits', image_size=8)
    def run(n: int):
        with tempfile.TemporaryDirectory() as d:
            c0 = time.process_time()
            ds = train(TrainConfig(**CPU_SIMCLR, epochs=n, out_dir=d), data=data)
            cpu = time.process_time() - c0
            return ds, cpu, read_checkpoint(Path(d)/CHECKPOINT)['model']
    run(1)                                                        # warm-up: oneDNN's kernels made, caches filled
    a, cpu_a, _ = run(1)
    b, cpu_b, state = run(1 + epochs)
    per_epoch = len(b['step_loss'][-1])
    steps = epochs * per_epoch
    env = compute_environment()
    return dict(ms_per_step=1000 * (b.attrs['train_seconds'] - a.attrs['train_seconds']) / steps,
                cpu_ms_per_step=1000 * (cpu_b - cpu_a) / steps, steps=steps, loss=float(b['loss'][-1]),
                sha256=weights_sha256(state), isa=env['isa'], onednn_isa=env['onednn_isa'],
                threads=env['threads'], environment=env)


def settings(no_simd: bool) -> dict:
    "Setting name -> the environment its child runs in."
    from cosine_pitfalls.repro.plan import PIN_ISA, PIN_THREADS
    from cosine_pitfalls.repro.execute import kernel_env
    base = {k: v for k, v in os.environ.items() if k not in PIN_ISA}
    out = {'best': dict(base, **PIN_THREADS), 'avx2': dict(base, **kernel_env('cpu'))}
    if no_simd: out['default'] = dict(base, **PIN_THREADS, ATEN_CPU_CAPABILITY='default')
    return out


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('--rounds', type=int, default=3, help='runs of each setting, alternating (default 3)')
    p.add_argument('--epochs', type=int, default=4, help='epochs of 11 steps each (default 4: 44 steps)')
    p.add_argument('--no-simd', action='store_true', help="also ATEN_CPU_CAPABILITY=default (torch without SIMD)")
    p.add_argument('--out', default='outputs/benchmarks', help='folder of the JSON (default outputs/benchmarks)')
    p.add_argument('--child', action='store_true', help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.child:
        print('@@' + json.dumps(child(a.epochs))); return {}
    from cosine_pitfalls.utils import atomic_write_text
    from cosine_pitfalls.repro.execute import cpu_flags, cpu_model, kernel_env
    envs = settings(a.no_simd)
    if 'ATEN_CPU_CAPABILITY' not in envs['avx2']:
        print('this CPU has no AVX2 and FMA: the runner pins nothing but the threads here; avx2 = best')
    runs = {k: [] for k in envs}
    t0 = time.time()
    for r in range(a.rounds):
        for name, env in envs.items():
            cp = subprocess.run([sys.executable, __file__, '--child', '--epochs', str(a.epochs)], env=env,
                                capture_output=True, text=True, timeout=1800)
            if cp.returncode: sys.exit(f'{name}: the child failed:\n{cp.stderr[-3000:]}')
            res = json.loads(next(l for l in cp.stdout.splitlines() if l.startswith('@@'))[2:])
            runs[name].append(res)
            print(f"round {r + 1} {name:8s} {res['ms_per_step']:7.1f} ms/step (CPU {res['cpu_ms_per_step']:.1f}), "
                  f"ISA {res['isa']} (oneDNN {res['onednn_isa']}), weights {res['sha256'][:12]}", flush=True)
    summary, pins = {}, kernel_env('cpu', {'avx2', 'fma'})
    for name, rs in runs.items():
        ms, cpu, hashes = [x['ms_per_step'] for x in rs], [x['cpu_ms_per_step'] for x in rs], {x['sha256'] for x in rs}
        summary[name] = dict(ms_per_step_median=statistics.median(ms), ms_per_step_min=min(ms), ms_per_step_max=max(ms),
                             cpu_ms_per_step_median=statistics.median(cpu), cpu_ms_per_step_min=min(cpu),
                             cpu_ms_per_step_max=max(cpu), isa=rs[0]['isa'], onednn_isa=rs[0]['onednn_isa'],
                             threads=rs[0]['threads'], steps=rs[0]['steps'], loss=rs[0]['loss'],
                             sha256=sorted(hashes), deterministic=len(hashes) == 1,
                             env={k: v for k, v in envs[name].items() if k in pins})
    best, best_cpu = summary['best']['ms_per_step_median'], summary['best']['cpu_ms_per_step_median']
    for s in summary.values():
        s['ratio_to_best'] = s['ms_per_step_median'] / best
        s['cpu_ratio_to_best'] = s['cpu_ms_per_step_median'] / best_cpu
    result = dict(benchmark='pinned_isa', created=datetime.datetime.now().isoformat(timespec='seconds'),
                  cpu=cpu_model(), cores=os.cpu_count(), avx512=any(f.startswith('avx512') for f in cpu_flags()),
                  rounds=a.rounds, epochs=a.epochs, config=CPU_SIMCLR, settings=summary,
                  same_weights_avx2_best=summary['avx2']['sha256'] == summary['best']['sha256'],
                  wall_s=round(time.time() - t0, 1))
    print(f"\n{cpu_model()}, {os.cpu_count()} cores; SimCLR on the digits at the cpu profile's settings, "
          f"{summary['best']['steps']} steps, one thread, {a.rounds} rounds")
    print(f"{'setting':8s} {'ISA (torch / oneDNN)':24s} {'wall ms/step (median, min-max)':32s} {'vs best':>7s}  "
          f"{'CPU ms/step (median, min-max)':31s} {'vs best':>7s}  same weights every round")
    for name, s in summary.items():
        wall = f"{s['ms_per_step_median']:.1f} ({s['ms_per_step_min']:.1f}-{s['ms_per_step_max']:.1f})"
        cpu = f"{s['cpu_ms_per_step_median']:.1f} ({s['cpu_ms_per_step_min']:.1f}-{s['cpu_ms_per_step_max']:.1f})"
        print(f"{name:8s} {s['isa'] + ' / ' + str(s['onednn_isa']):24s} {wall:32s} {s['ratio_to_best']:6.3f}x  "
              f"{cpu:31s} {s['cpu_ratio_to_best']:6.3f}x  {s['deterministic']}")
    print(f"avx2 and best give the same weights: {result['same_weights_avx2_best']}"
          + (' (this CPU has no AVX-512: its best is AVX2)' if not result['avx512'] else ''))
    out = Path(a.out); out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out/'pinned_isa.json', json.dumps(result, indent=1))
    print(f'written to {out/"pinned_isa.json"}')
    return result


if __name__ == '__main__':
    main()
