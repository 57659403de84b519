"""Benchmark: writing and reading a run's history (run.nc), netCDF-3 (`utils.write_nc3` / `read_nc`, what `train`
writes) against HDF5 (h5netcdf, what it wrote before), side by side in one process.

The run is a real one: `train` on the digits for `--epochs` epochs of 2 steps (the smoke profile's size, whose
cost is mostly this file), then its Dataset written and read back `--repeats` times each way, alternating, into a
temporary folder. Medians per write and per read, and the ratios.

    python benchmarks/run_io.py [--out outputs/benchmarks] [--repeats 20] [--epochs 3]

writes <out>/run_io.json and <out>/run_io.md atomically and prints the table.
"""
from __future__ import annotations

import argparse, datetime, json, platform, statistics, tempfile, time
from pathlib import Path

import xarray as xr

from cosine_pitfalls.train import TrainConfig, train
from cosine_pitfalls.utils import atomic_write_text, read_nc, write_nc3


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--out', default='outputs/benchmarks')
    ap.add_argument('--repeats', type=int, default=20)
    ap.add_argument('--epochs', type=int, default=3)
    a = ap.parse_args(argv)
    if a.repeats < 1 or a.epochs < 1: ap.error('--repeats and --epochs must be at least 1')
    ds = train(TrainConfig(dataset='digits', method='simclr', backbone='small_cnn', width=8, epochs=a.epochs,
                           steps_per_epoch=2, batch_size=32, show_progress=False))
    t = {k: [] for k in ('write netCDF-3', 'write HDF5', 'read netCDF-3', 'read HDF5')}
    with tempfile.TemporaryDirectory() as d:
        nc3, h5 = Path(d)/'a.nc', Path(d)/'b.nc'
        for _ in range(a.repeats):   # alternating, so that the machine's load falls on both alike
            s = time.perf_counter(); write_nc3(ds, nc3); t['write netCDF-3'].append(time.perf_counter() - s)
            s = time.perf_counter(); ds.to_netcdf(h5, engine='h5netcdf')
            t['write HDF5'].append(time.perf_counter() - s)
            s = time.perf_counter(); back3 = read_nc(nc3); t['read netCDF-3'].append(time.perf_counter() - s)
            s = time.perf_counter(); back5 = xr.load_dataset(h5, engine='h5netcdf'); t['read HDF5'].append(
                time.perf_counter() - s)
        same = back3.identical(ds) and back5.identical(ds)
        sizes = {'netCDF-3': nc3.stat().st_size, 'HDF5': h5.stat().st_size}
    med = {k: statistics.median(v) for k, v in t.items()}
    res = dict(when=datetime.datetime.now().isoformat(timespec='seconds'), machine=platform.processor() or
               platform.machine(), variables=len(ds.data_vars), epochs=a.epochs, repeats=a.repeats,
               median_s=med, bytes=sizes, both_read_back_identical=bool(same),
               write_ratio=med['write HDF5'] / med['write netCDF-3'],
               read_ratio=med['read HDF5'] / med['read netCDF-3'])
    lines = [f"# run.nc: netCDF-3 against HDF5 ({res['when']}, {len(ds.data_vars)} variables, {a.epochs} epochs, "
             f"{a.repeats} repeats each, alternating)", '',
             '| | netCDF-3 | HDF5 | HDF5 / netCDF-3 |', '|---|---|---|---|',
             f"| write (median) | {med['write netCDF-3'] * 1e3:.1f} ms | {med['write HDF5'] * 1e3:.1f} ms | "
             f"{res['write_ratio']:.1f}× |",
             f"| read (median) | {med['read netCDF-3'] * 1e3:.1f} ms | {med['read HDF5'] * 1e3:.1f} ms | "
             f"{res['read_ratio']:.1f}× |",
             f"| file size | {sizes['netCDF-3']:,} B | {sizes['HDF5']:,} B | |", '',
             f"Both read back identical to the run's Dataset: {same}."]
    out = Path(a.out); out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out/'run_io.json', json.dumps(res, indent=1))
    atomic_write_text(out/'run_io.md', '\n'.join(lines) + '\n')
    print('\n'.join(lines))
    return res


if __name__ == '__main__': main()
