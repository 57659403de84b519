"""Training throughput, three ways, side by side in one process on one device (issue: speed where it counts).

(a) reference: the loop the peers' CIFAR examples use — torchvision v2 transforms per image on the CPU in a DataLoader
    with workers, fp32, eager;
(b) our trainer: `cosine_pitfalls.train.train` (views made on the device, bf16 + channels_last on CUDA, optional
    `torch.compile` of the training step: `--compile` or `--compile reduce-overhead` for CUDA graphs);
(c) the model step alone on pre-made views (the ceiling for (b)).
Plus the kNN monitor: 10k queries against a 50k bank (512-d) on the device, and one whole evaluation (features of
the training and test images, then the kNN) as the trainer runs it every `eval_every` epochs.

SimCLR. `--config cifar`: ResNet-18, batch 512, CIFAR-shaped data (CIFAR-10 from data/ if it is there, else synthetic
uint8 images of the same shape — the JSON says which). `--config digits`: the small CNN on 16x16 digits, batch 256, the
CPU configuration of sections 4-5. `auto` picks cifar on CUDA, digits on CPU. Timings are wall-clock over `--steps`
steps after `--warmup` steps; they are measured, not asserted. Writes <out>/train_throughput.json and prints a table.
"""
import argparse, json, os, platform, sys, time
from pathlib import Path

import torch

from cosine_pitfalls.utils import atomic_write_text, get_device
from cosine_pitfalls.data import AUG_PRESETS, ImageData, channel_stats, load_dataset, make_views, torchvision_pipeline
from cosine_pitfalls.evaluation import knn_topk
from cosine_pitfalls.train import COMPILE_MODES, TrainConfig, build_model, compile_step, evaluate, make_optimizer, train

CONFIGS = {
    'cifar': dict(backbone='resnet18', batch_size=512, head_width=2048, head_out=128, augment='simclr', lr=0.5),
    'digits': dict(backbone='small_cnn', width=32, batch_size=256, head_width=128, head_out=64, augment='digits',
                   optimizer='adamw', lr=4e-3, weight_decay=1e-4),
}


def cifar_shaped(device, n: int = 50000) -> ImageData:
    "CIFAR-10 from data/ if it is on disk, else synthetic uint8 images of its shape (said in `source`)."
    try: return load_dataset('cifar10', 'data', device=device)
    except (FileNotFoundError, ValueError):
        g = torch.Generator().manual_seed(0)
        x = torch.randint(0, 256, (n, 3, 32, 32), generator=g, dtype=torch.uint8)
        y = torch.randint(0, 10, (n,), generator=g)
        mean, std = channel_stats(x)
        return ImageData('synthetic', x.to(device), y.to(device), x[:10000].to(device), y[:10000].to(device), 10, mean, std,
                         'synthetic uint8 images of CIFAR-10 shape (CIFAR-10 is not on disk)')


def timed(fn, steps: int, warmup: int, device) -> float:
    "Seconds per step of fn(), after warmup steps, with the device synchronized."
    for _ in range(warmup): fn()
    if device.type == 'cuda': torch.cuda.synchronize(device)
    t0 = time.perf_counter()
    for _ in range(steps): fn()
    if device.type == 'cuda': torch.cuda.synchronize(device)
    return (time.perf_counter() - t0) / steps


def reference(cfg: TrainConfig, data: ImageData, device, steps, warmup, workers) -> float:
    "(a) torchvision v2 per image on the CPU in a DataLoader with workers, fp32, eager."
    from torch.utils.data import DataLoader, Dataset
    spec1, spec2 = AUG_PRESETS[cfg.preset()]
    side = data.train_x.shape[-1]
    t1, t2 = (torchvision_pipeline(s, data.mean, data.std, side) for s in (spec1, spec2))
    x_cpu = data.train_x.cpu()

    class Views(Dataset):
        def __len__(self): return len(x_cpu)
        def __getitem__(self, i): return t1(x_cpu[i]), t2(x_cpu[i])

    loader = DataLoader(Views(), batch_size=cfg.batch_size, shuffle=True, drop_last=True, num_workers=workers,
                        persistent_workers=workers > 0)
    model = build_model(cfg, data.num_classes, len(data.train_x), data.train_x.shape[1]).to(device)
    opt = make_optimizer(model, cfg)
    it = iter(loader)

    def step():
        nonlocal it
        try: v1, v2 = next(it)
        except StopIteration: it = iter(loader); v1, v2 = next(it)
        loss = model([v1.to(device, non_blocking=True), v2.to(device, non_blocking=True)]).loss
        opt.zero_grad(set_to_none=True); loss.backward(); opt.step()
    return timed(step, steps, warmup, device)


def model_step(cfg: TrainConfig, data: ImageData, device, steps, warmup) -> float:
    "(c) the trainer's model step (same precision, memory format, compile) on views made once."
    cuda = device.type == 'cuda'
    model = build_model(cfg, data.num_classes, len(data.train_x), data.train_x.shape[1]).to(device)
    if cuda and cfg.channels_last: model = model.to(memory_format=torch.channels_last)
    net = compile_step(model, cfg.compile) if cfg.compile else model       # the trainer's compiled step
    opt = make_optimizer(model, cfg)
    graphs = cuda and cfg.compile == 'reduce-overhead'
    views = make_views(data.train_x[:cfg.batch_size], cfg.preset(), torch.Generator(device=device).manual_seed(0),
                       data.mean, data.std)
    if cuda and cfg.channels_last: views = [v.contiguous(memory_format=torch.channels_last) for v in views]

    def step():
        if graphs: torch.compiler.cudagraph_mark_step_begin()
        with torch.autocast('cuda', torch.bfloat16, enabled=cfg.amp and cuda): loss = net(views).loss
        opt.zero_grad(set_to_none=True); loss.backward(); opt.step()
    return timed(step, steps, warmup, device)


def trainer(cfg: TrainConfig, data: ImageData, steps, warmup) -> float:
    "(b) `train` itself, seconds per step over whole epochs after a first (warm-up) epoch, >= `steps` steps in all."
    spe = len(data.train_x) // cfg.batch_size
    epochs = 1 + -(-steps // spe)                                          # the first epoch is the warm-up
    kw = {**cfg.__dict__, 'epochs': epochs, 'steps_per_epoch': 0, 'eval_every': 0, 'checkpoint_every': 0,
          'out_dir': '', 'show_progress': False, 'diag_samples': 256}
    ds = train(TrainConfig(**kw), data=data)
    return float(ds['epoch_seconds'].isel(epoch=slice(1, None)).sum()) / ((epochs - 1) * spe)


def knn_time(device, n_bank=50000, n_query=10000, dim=512, reps=3) -> float:
    "Seconds for the kNN monitor (k = 200, T = 0.1, top-1/top-5) of 10k queries against a 50k bank."
    g = torch.Generator().manual_seed(0)
    bank, query = torch.randn(n_bank, dim, generator=g).to(device), torch.randn(n_query, dim, generator=g).to(device)
    yb, yq = torch.randint(0, 10, (n_bank,), generator=g).to(device), torch.randint(0, 10, (n_query,), generator=g).to(device)
    return timed(lambda: knn_topk(bank, yb, query, yq, k=200, temperature=0.1, chunk_size=2048), reps, 1, device)


def eval_time(cfg: TrainConfig, data: ImageData, device, reps: int = 2) -> float:
    "Seconds of one evaluation as the trainer runs it (features of the training and test images, the kNN)."
    model = build_model(cfg, data.num_classes, len(data.train_x), data.train_x.shape[1]).to(device)
    amp = 'cuda' if device.type == 'cuda' and cfg.amp else None
    return timed(lambda: evaluate(model, data, cfg, autocast=amp), reps, 1, device)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('--config', default='auto', choices=['auto', 'cifar', 'digits'])
    p.add_argument('--device', default='auto')
    p.add_argument('--steps', type=int, default=20); p.add_argument('--warmup', type=int, default=5)
    p.add_argument('--workers', type=int, default=min(8, os.cpu_count() or 1))
    p.add_argument('--compile', nargs='?', const='default', default=None, choices=COMPILE_MODES,
                   help="torch.compile the training step in (b) and (c): a mode (default 'default')")
    p.add_argument('--out', default='outputs/benchmarks')
    a = p.parse_args(argv)
    device = get_device(a.device)
    name = a.config if a.config != 'auto' else ('cifar' if device.type == 'cuda' else 'digits')
    if a.steps < 1 or a.warmup < 0: p.error('--steps must be >= 1 and --warmup >= 0')
    how = False if a.compile is None else True if a.compile == 'default' else a.compile
    cfg = TrainConfig(method='simclr', device=str(device), compile=how, **CONFIGS[name], show_progress=False)
    data = cifar_shaped(device) if name == 'cifar' else load_dataset('digits', device=device)
    if name == 'digits': torch.set_num_threads(os.cpu_count() or 1)
    res = {}
    res['reference_s_per_step'] = reference(cfg, data, device, a.steps, a.warmup, a.workers)
    res['trainer_s_per_step'] = trainer(cfg, data, a.steps, a.warmup)
    res['model_step_s_per_step'] = model_step(cfg, data, device, a.steps, a.warmup)
    res['knn_10k_vs_50k_s'] = knn_time(device)
    res['evaluation_s'] = eval_time(cfg, data, device)
    B = cfg.batch_size
    for k in ('reference', 'trainer', 'model_step'):
        res[f'{k}_images_per_s'] = B / res[f'{k}_s_per_step']
        res[f'{k}_s_per_50k_epoch'] = 50000 / res[f'{k}_images_per_s']
    res['trainer_over_reference'] = res['trainer_images_per_s'] / res['reference_images_per_s']
    res['trainer_over_model_step'] = res['trainer_images_per_s'] / res['model_step_images_per_s']
    dev = torch.cuda.get_device_name(device) if device.type == 'cuda' else f'cpu ({os.cpu_count()} cores, {platform.machine()})'
    out = dict(device=dev, torch=torch.__version__, config=name, data=data.source, batch_size=B, steps=a.steps,
               warmup=a.warmup, loader_workers=a.workers, compile=a.compile, amp=cfg.amp and device.type == 'cuda',
               model=dict(backbone=cfg.backbone, method='simclr', head=(cfg.head_width, cfg.head_out)), results=res)
    path = Path(a.out)/f"train_throughput{'' if a.compile is None else '_compile_' + a.compile}.json"
    atomic_write_text(path, json.dumps(out, indent=1))
    print(f"{dev}, {name} ({data.source[:60]}), SimCLR, batch {B}, {a.steps} steps after {a.warmup}")
    for k, label in (('reference', '(a) reference loop'), ('trainer', '(b) our trainer'), ('model_step', '(c) model step alone')):
        print(f"{label:<24} {res[f'{k}_images_per_s']:>9.0f} img/s  {res[f'{k}_s_per_50k_epoch']:>7.2f} s per 50k images")
    print(f"(b)/(a) = {res['trainer_over_reference']:.2f}x, (b)/(c) = {res['trainer_over_model_step']:.2f}; "
          f"kNN 10k vs 50k: {res['knn_10k_vs_50k_s']:.3f} s; one evaluation {res['evaluation_s']:.2f} s "
          f"= {res['evaluation_s'] / res['trainer_s_per_50k_epoch']:.2f} of a 50k-image epoch  -> {path}")
    return 0


if __name__ == '__main__':
    sys.exit(main())
