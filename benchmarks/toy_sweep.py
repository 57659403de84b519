"""Benchmark: one section-2 sweep run as one batched tensor program vs. a Python loop over its cells.

The sweep is pitfalls Figure 2 (`cosine_pitfalls.repro.toy.alignment_sweep`): Prop. 1 gradient steps on positive pairs
in R^20 until each (rho, phi, seed) cell's mean cosine exceeds 0.999. Both versions run in this one process on the
same grid and the same initial pairs (`alignment_sweep_loop` is the per-cell reference), and must give identical
step counts. Each version is timed `--repeats` times; the best time counts.

    python benchmarks/toy_sweep.py [--out outputs/benchmarks] [--threads 0] [--repeats 3]

writes <out>/toy_sweep.json atomically and prints the numbers.
"""
from __future__ import annotations

import argparse
import datetime
import json
import math
import platform
import sys
import time
from pathlib import Path

import numpy as np
import torch

from cosine_pitfalls.utils import atomic_write_text
from cosine_pitfalls.repro.toy import alignment_sweep, alignment_sweep_loop


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('--out', default='outputs/benchmarks', help='folder for toy_sweep.json (default: outputs/benchmarks)')
    p.add_argument('--threads', type=int, default=0, help='torch CPU threads (0: leave torch default)')
    p.add_argument('--repeats', type=int, default=3, help='timings per version; the best counts (default 3)')
    p.add_argument('--n-rho', type=int, default=6, help='mean norms, log-spaced in [1, 8] (default 6)')
    p.add_argument('--n-phi', type=int, default=6, help='angles in [pi/8, 7pi/8] (default 6)')
    p.add_argument('--seeds', type=int, default=2, help='seeds per cell (default 2)')
    p.add_argument('--pairs', type=int, default=32, help='positive pairs per cell (default 32)')
    a = p.parse_args(argv)
    for name in ('repeats', 'n_rho', 'n_phi', 'seeds', 'pairs'):
        if getattr(a, name) < 1: p.error(f'--{name.replace("_", "-")} must be >= 1; got {getattr(a, name)}')
    if a.threads < 0: p.error(f'--threads must be >= 0; got {a.threads}')
    if a.threads: torch.set_num_threads(a.threads)
    grid = dict(rhos=np.geomspace(1.0, 8.0, a.n_rho), phis=np.linspace(math.pi / 8, 7 * math.pi / 8, a.n_phi),
                n_seeds=a.seeds, n_pairs=a.pairs, dim=20, lr=0.25, threshold=0.999, seed=0)

    def best(fn):
        times, out = [], None
        for _ in range(a.repeats):
            t0 = time.perf_counter(); out = fn(**grid); times.append(time.perf_counter() - t0)
        return min(times), times, out

    alignment_sweep(**{**grid, 'rhos': grid['rhos'][:1], 'phis': grid['phis'][:1]})   # warm-up (lazy init of torch ops)
    t_batch, all_batch, ds_batch = best(alignment_sweep)
    t_loop, all_loop, ds_loop = best(alignment_sweep_loop)
    equal = bool((ds_batch['steps'].values == ds_loop['steps'].values).all())
    cells = a.n_rho * a.n_phi * a.seeds
    result = {
        'benchmark': 'pitfalls.fig2 alignment sweep (cosine_pitfalls.repro.toy.alignment_sweep): batched vs per-cell loop',
        'grid': {'rho': a.n_rho, 'phi': a.n_phi, 'seed': a.seeds, 'pairs_per_cell': a.pairs, 'dim': 20, 'cells': cells,
                 'max_steps_taken': int(ds_batch['steps'].max()), 'total_cell_steps': int(ds_batch['steps'].sum())},
        'batched_s': t_batch, 'loop_s': t_loop, 'ratio_loop_over_batched': t_loop / t_batch,
        'batched_all_s': all_batch, 'loop_all_s': all_loop, 'results_identical': equal,
        'torch_version': torch.__version__, 'threads': torch.get_num_threads(), 'device': 'cpu',
        'python': sys.version.split()[0], 'platform': platform.platform(),
        'created': datetime.datetime.now(datetime.timezone.utc).isoformat(timespec='seconds'),
    }
    path = atomic_write_text(Path(a.out) / 'toy_sweep.json', json.dumps(result, indent=1))
    print(f"grid {a.n_rho}x{a.n_phi}x{a.seeds} = {cells} cells x {a.pairs} pairs (torch {torch.__version__}, {torch.get_num_threads()} threads)")
    print(f"batched: {t_batch:.3f}s   per-cell loop: {t_loop:.3f}s   ratio: {t_loop / t_batch:.1f}x   identical results: {equal}")
    print(f"wrote {path}")
    if not equal: raise SystemExit('batched and per-cell results differ')
    return result


if __name__ == '__main__':
    main()
