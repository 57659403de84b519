"""What the gpu profile's price rests on, measured on a lent GPU in one run of about 8 minutes (issue 36, point 5).

(1) steps: the profile's own preflight on this GPU, eager: every distinct (code path, batch, side) stepped at its
    real size, each path's step time with its aten calls and FLOPs counted (`repro.price.count_step`); the price's
    step model refitted to them (`repro.price.fit_to_steps`) and the profile priced on it;
(2) packing: K = 1, 2, 4, 8 processes, each training SimCLR / ResNet-18 at batch 256 on this GPU at the same moment
    (a start barrier after their warm-up), their images/s summed, against one alone: the gain of K runs per GPU;
(3) CUDA graphs: one run with compile='reduce-overhead' against eager: the compile time its first epoch pays, and
    the step after it.

Writes <out>/gpu_price.json (and the preflight's text) and prints a summary. `--dry-run` does the same at toy size
on the CPU (section 4 at smoke, the small CNN on digits), to check the script before a GPU is lent.
"""
import argparse, json, os, subprocess, sys, tempfile, time
from pathlib import Path


def worker(args) -> None:
    "One packing process: warm up, wait for the common start, train `steps` steps; print its images/s as JSON."
    import torch
    from cosine_pitfalls.train import TrainConfig, train
    from cosine_pitfalls.data import load_dataset
    dev = 'cuda' if torch.cuda.is_available() and not args.dry_run else 'cpu'
    if args.dry_run:
        data = load_dataset('digits')
        cfg = TrainConfig(method='simclr', backbone='small_cnn', width=32, dataset='digits', batch_size=64,
                          head_width=64, head_out=32, optimizer='adamw', lr=4e-3, device=dev, threads=1,
                          record_init=False, eval_every=0, linear_probe=False, out_dir='', compile=args.compile,
                          show_progress=False)
    else:
        sys.path.insert(0, str(Path(__file__).parent))
        from train_throughput import cifar_shaped
        data = cifar_shaped(torch.device(dev))
        cfg = TrainConfig(method='simclr', backbone='resnet18', dataset='cifar10', batch_size=args.batch,
                          head_width=2048, head_out=128, lr=0.3, device=dev, record_init=False, eval_every=0,
                          linear_probe=False, out_dir='', compile=args.compile, show_progress=False)
    import dataclasses
    warm = train(dataclasses.replace(cfg, epochs=1, steps_per_epoch=5), data=data)   # CUDA, cuDNN, allocator warm
    while time.time() < args.start_at: time.sleep(0.01)
    ds = train(dataclasses.replace(cfg, epochs=2 if args.compile else 1, steps_per_epoch=args.steps), data=data)
    e = [float(v) for v in ds.epoch_seconds.values if v == v]
    print(json.dumps(dict(images_per_second=args.steps * cfg.batch_size / e[-1], epoch_seconds=e,
                          warm_seconds=float(warm.attrs['train_seconds']))), flush=True)


def packing(ks, args, out: Path) -> list[dict]:
    "K processes at once, each its own run: summed images/s against one alone."
    rows = []
    for k in ks:
        start = time.time() + (20 if not args.dry_run else 8) + 2 * k
        cmd = [sys.executable, __file__, '--worker', '--start-at', str(start), '--steps', str(args.steps),
               '--batch', str(args.batch)] + (['--dry-run'] if args.dry_run else [])
        procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True) for _ in range(k)]
        got = [json.loads(p.communicate(timeout=600)[0].strip().splitlines()[-1]) for p in procs]
        total = sum(g['images_per_second'] for g in got)
        rows.append(dict(k=k, images_per_second=total, per_process=[g['images_per_second'] for g in got]))
        print(f"  K={k}: {total:,.0f} img/s in all ({', '.join(f'{g:,.0f}' for g in rows[-1]['per_process'])})",
              flush=True)
    base = rows[0]['images_per_second']
    for r in rows: r['gain'] = r['images_per_second'] / base
    return rows


def graphs(args) -> dict:
    "One run compiled as CUDA graphs: its first epoch (compile included) and its step after, against eager."
    out = {}
    graph_mode = 'reduce-overhead' if not args.dry_run else 'default'   # the CPU has no CUDA graphs: the compile path
    for mode in ('eager', graph_mode):
        cmd = [sys.executable, __file__, '--worker', '--start-at', '0', '--steps', str(args.steps), '--batch',
               str(args.batch)] + (['--compile', mode] if mode != 'eager' else []) + (['--dry-run'] if args.dry_run else [])
        r = json.loads(subprocess.run(cmd, capture_output=True, text=True, timeout=900).stdout.strip().splitlines()[-1])
        out[mode] = r
    e, g = out['eager'], out[graph_mode]
    step_e, step_g = e['epoch_seconds'][-1] / args.steps, g['epoch_seconds'][-1] / args.steps
    # the compile happens in the warm-up's 5 steps (train_seconds): its excess over eager's warm-up
    comp = max(0.0, (g['warm_seconds'] - 5 * step_g) - (e['warm_seconds'] - 5 * step_e))
    out['summary'] = dict(step_eager_s=step_e, step_graphs_s=step_g, compile_s=comp,
                          steps_to_repay=comp / (step_e - step_g) if step_e > step_g else None)   # None: never
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('--out', default=None, help='default: benchmarks/measured/<date>_<device>/')
    p.add_argument('--dry-run', action='store_true', help='toy sizes on the CPU: checks the script')
    p.add_argument('--skip', nargs='*', default=[], choices=['steps', 'packing', 'graphs'])
    p.add_argument('--steps', type=int, default=60, help='measured steps per packing / graphs process')
    p.add_argument('--batch', type=int, default=256)
    p.add_argument('--worker', action='store_true', help=argparse.SUPPRESS)
    p.add_argument('--start-at', type=float, default=0.0, help=argparse.SUPPRESS)
    p.add_argument('--compile', default=False, help=argparse.SUPPRESS)   # a mode of train.COMPILE_MODES
    args = p.parse_args()
    if args.worker: worker(args); return 0
    import torch
    cuda = torch.cuda.is_available() and not args.dry_run
    name = torch.cuda.get_device_name(0) if cuda else 'cpu'
    out = Path(args.out or Path(__file__).parent/'measured'/f"{time.strftime('%Y-%m-%d')}_{name.split()[-1].lower()}")
    out.mkdir(parents=True, exist_ok=True)
    res = dict(benchmark='gpu_price', device=name, torch=torch.__version__, date=time.strftime('%Y-%m-%d'),
               dry_run=args.dry_run, cpu_cores=os.cpu_count())
    t0 = time.time()
    if 'steps' not in args.skip:
        from cosine_pitfalls.repro.preflight import preflight, report_text
        from cosine_pitfalls.repro.price import count_step, fit_to_steps, hours
        profile, kw = ('smoke', dict(sections=[4], device='cpu')) if args.dry_run else ('gpu', {})
        rep = preflight(profile, steps=2, log=lambda s: print(s, flush=True), **kw)
        (out/f'preflight_{profile}.txt').write_text(report_text(rep) + '\n')
        rows = []
        for pth in rep.paths:
            if not pth.step_s: continue
            name_, cfg, info = pth.runs[0]
            f, calls = count_step(cfg, info)
            rows.append(dict(run=name_, runs=len(pth.runs), batch=pth.stepped[0], side=pth.stepped[1], step_s=pth.step_s,
                             flops=f * pth.stepped[0], calls=calls, seconds=pth.seconds))
        model, resid = fit_to_steps(rows, name)
        res['steps'] = dict(profile=profile, paths=rows, failures=rep.failures, estimate_s=sum(rep.seconds.values()),
                            fit=dict(launch_s=model.launch_s, rate=model.rate, log_residual_sd=resid))
        print(f"steps: {len(rows)} paths; this device's estimate {hours(sum(rep.seconds.values()))}; refit: "
              f"{model.launch_s * 1e6:.1f} µs per call + FLOPs at {model.rate / 1e12:.0f} TFLOP/s "
              f"(log residual sd {resid:.2f}) ({time.time() - t0:.0f} s)", flush=True)
    if 'packing' not in args.skip:
        print('packing:', flush=True)
        res['packing'] = packing([1, 2] if args.dry_run else [1, 2, 4, 8], args, out)
        print(f'  ({time.time() - t0:.0f} s)', flush=True)
    if 'graphs' not in args.skip and (cuda or args.dry_run):
        g = graphs(args)
        res['graphs'] = g
        print(f"graphs: {g['summary']} ({time.time() - t0:.0f} s)", flush=True)
    (out/'gpu_price.json').write_text(json.dumps(res, indent=1, default=str) + '\n')
    print(f'-> {out/"gpu_price.json"}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
