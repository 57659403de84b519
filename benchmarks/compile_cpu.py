"""The training step compiled on the CPU (issue 27, point 3): what inductor buys a `cpu`-profile run, and what it costs.

One process, one thread (what `sweep` gives each run), the digits configuration of sections 4-5 (`DIGITS_CPU`):
the same run eager and with `compile=True` (inductor's C++ kernels, the vector ISA pinned by ATEN_CPU_CAPABILITY as
the runner pins it), per method. Epoch times after the first (median), the first compiled epoch (the compile, cold
or from inductor's cache on disk: run the script twice to see both; `TORCHINDUCTOR_CACHE_DIR` says where), and the
per-step losses' largest difference. Writes <out>/compile_cpu.json. Measured, not asserted.
"""
import argparse, dataclasses, json, os, statistics, sys, time
from pathlib import Path

import torch

from cosine_pitfalls.data import load_dataset
from cosine_pitfalls.train import DIGITS_CPU, TrainConfig, device_choices, train
from cosine_pitfalls.utils import atomic_write_text


def one(method: str, epochs: int, data) -> dict:
    "The run eager, then compiled (in this order, in this process): epoch seconds, wall, per-step loss difference."
    cfg = TrainConfig(**{**DIGITS_CPU, 'method': method, 'epochs': epochs, 'eval_every': 0, 'show_progress': False,
                         'threads': 1})
    out = {}
    for how in (False, True):
        ch = dataclasses.replace(device_choices(cfg, torch.device('cpu')), compile=how)
        t0 = time.perf_counter(); ds = train(cfg, data=data, choices=ch)
        out['compiled' if how else 'eager'] = dict(wall_s=time.perf_counter() - t0,
                                                   epoch_s=[float(x) for x in ds['epoch_seconds'].values.ravel()],
                                                   step_loss=ds['step_loss'].values.ravel())
    e, c = out['eager'], out['compiled']
    med = {k: statistics.median(v['epoch_s'][1:]) for k, v in out.items()}
    return dict(epochs=epochs, steps_per_epoch=len(e['step_loss']) // epochs, eager_epoch_s=med['eager'],
                compiled_epoch_s=med['compiled'], speedup=med['eager'] / med['compiled'],
                first_compiled_epoch_s=c['epoch_s'][0], first_eager_epoch_s=e['epoch_s'][0],
                max_abs_step_loss_diff=float(abs(e['step_loss'] - c['step_loss']).max()),
                wall_eager_s=e['wall_s'], wall_compiled_s=c['wall_s'])


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('--methods', default='simclr,byol'); p.add_argument('--epochs', type=int, default=12)
    p.add_argument('--out', default='outputs/benchmarks')
    a = p.parse_args(argv)
    if a.epochs < 2: p.error('--epochs must be >= 2 (the first epoch holds the compile)')
    torch.set_num_threads(1)
    data, res, load0 = load_dataset('digits'), {}, os.getloadavg()[0]
    for m in a.methods.split(','): res[m] = one(m, a.epochs, data)
    out = dict(benchmark='compile_cpu', issue=27, torch=torch.__version__, cores=os.cpu_count(),
               isa=os.environ.get('ATEN_CPU_CAPABILITY', 'unpinned'), threads=1,
               cache=os.environ.get('TORCHINDUCTOR_CACHE_DIR', 'default'), loadavg_1min=[load0, os.getloadavg()[0]],
               config='DIGITS_CPU', results=res)
    path = Path(a.out)/'compile_cpu.json'
    atomic_write_text(path, json.dumps(out, indent=1))
    print(f"CPU, {os.cpu_count()} cores, one thread, ISA {out['isa']}, torch {torch.__version__}; load {load0:.1f}")
    for m, r in res.items():
        print(f"{m:12s} epoch ({r['steps_per_epoch']} steps): eager {r['eager_epoch_s']:.3f} s, compiled "
              f"{r['compiled_epoch_s']:.3f} s ({r['speedup']:.2f}x); first compiled epoch {r['first_compiled_epoch_s']:.1f} s "
              f"(eager {r['first_eager_epoch_s']:.1f} s); max |step-loss diff| {r['max_abs_step_loss_diff']:.1e}")
    print(f'-> {path}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
