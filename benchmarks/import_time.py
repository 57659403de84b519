"""Benchmark: how long importing each module of the package takes, over torch's own import.

Each module is imported in a fresh interpreter (outside the repository, the package this script imports on
PYTHONPATH): first `import torch` (timed), then `import cosine_pitfalls.<module>` (timed: what the module adds
after torch). `--repeats` fresh interpreters per module; the median and the best count. Also listed: which of
pandas, xarray, papermill, matplotlib, torchvision, scikit-learn the import loaded.

    python benchmarks/import_time.py [--out outputs/benchmarks] [--repeats 5] [--modules losses,methods]

writes <out>/import_time.json and <out>/import_time.md atomically and prints the table.
"""
from __future__ import annotations

import argparse, datetime, importlib.util, json, os, platform, statistics, subprocess, sys
from pathlib import Path

import cosine_pitfalls
from cosine_pitfalls.utils import atomic_write_text

MODULES = ('utils', 'losses', 'similarity_losses', 'mechanisms', 'evaluation', 'diagnostics', 'models',
           'methods', 'data', 'train', 'repro.verdicts', 'repro.cli')
HEAVY = ('pandas', 'xarray', 'papermill', 'matplotlib', 'torchvision', 'sklearn')
PROBE = """import json, sys, time
t0 = time.perf_counter(); import torch; t1 = time.perf_counter()
import importlib; importlib.import_module('cosine_pitfalls.' + sys.argv[1]); t2 = time.perf_counter()
print(json.dumps(dict(torch=t1 - t0, module=t2 - t1, heavy=[m for m in {heavy!r} if m in sys.modules])))
""".format(heavy=HEAVY)


def time_import(name: str, src: str) -> dict:
    "One fresh interpreter: seconds for `import torch`, seconds the module adds, heavy modules loaded."
    env = {k: v for k, v in os.environ.items() if k != 'PYTHONSTARTUP'}
    env['PYTHONPATH'] = src
    r = subprocess.run([sys.executable, '-c', PROBE, name], capture_output=True, text=True, cwd='/', env=env,
                       timeout=600)
    if r.returncode: raise RuntimeError(f'import of cosine_pitfalls.{name} failed:\n{r.stderr}')
    return json.loads(r.stdout.strip().splitlines()[-1])


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('--out', default='outputs/benchmarks', help='folder for import_time.json|md')
    p.add_argument('--repeats', type=int, default=5, help='fresh interpreters per module (default 5)')
    p.add_argument('--modules', default='', help='comma-separated modules (default: those of MODULES present)')
    a = p.parse_args(argv)
    if a.repeats < 1: p.error(f'--repeats must be >= 1; got {a.repeats}')
    names = ([m.strip() for m in a.modules.split(',') if m.strip()] if a.modules else
             [m for m in MODULES if importlib.util.find_spec(f'cosine_pitfalls.{m}') is not None])
    unknown = [m for m in names if importlib.util.find_spec(f'cosine_pitfalls.{m}') is None]
    if unknown or not names:
        p.error(f"--modules must name modules of cosine_pitfalls ({', '.join(MODULES)}); unknown: {unknown}")
    src = str(Path(cosine_pitfalls.__file__).parent.parent)
    rows = []
    for name in names:
        runs = [time_import(name, src) for _ in range(a.repeats)]
        mod = [r['module'] for r in runs]
        rows.append(dict(module=name, median_s=statistics.median(mod), best_s=min(mod),
                         torch_median_s=statistics.median(r['torch'] for r in runs), heavy=runs[-1]['heavy']))
        r = rows[-1]
        print(f"{name:18s} +{r['median_s']:6.3f} s (best {r['best_s']:6.3f}) after torch "
              f"({r['torch_median_s']:5.2f} s)   loads: {', '.join(r['heavy']) or '-'}", flush=True)
    result = dict(benchmark='import time of each cosine_pitfalls module over torch, fresh interpreter each',
                  repeats=a.repeats, rows=rows, python=platform.python_version(), cpus=os.cpu_count(),
                  machine=platform.machine(), package=src,
                  created=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec='seconds'))
    md = ['# Import time over torch', '', f'{a.repeats} fresh interpreters per module; seconds after '
          '`import torch`; python ' + platform.python_version() + f', {os.cpu_count()} CPUs.', '',
          '| module | median (s) | best (s) | torch itself (s) | heavy modules loaded |',
          '| --- | --- | --- | --- | --- |']
    md += [f"| `{r['module']}` | {r['median_s']:.3f} | {r['best_s']:.3f} | {r['torch_median_s']:.2f} | "
           f"{', '.join(r['heavy']) or '—'} |" for r in rows]
    out = Path(a.out)
    atomic_write_text(out/'import_time.json', json.dumps(result, indent=1) + '\n')
    atomic_write_text(out/'import_time.md', '\n'.join(md) + '\n')
    print('wrote', out/'import_time.json', 'and', out/'import_time.md')
    return result


if __name__ == '__main__':
    main()
