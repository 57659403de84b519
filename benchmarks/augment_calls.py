"""Augmentation in a few fused kernels (issue 27, point 1): the two views of a batch, before and after.

For every preset without a RandAugment/AutoAugment policy (simclr, byol, margins, digits; `--policies` adds
the two policy presets), in one process and on the same batch:
- the tensor operations of `make_views(x, preset, g, mean, std, sync_free=True)`: top-level aten calls (what
  the issue counts; an operation that calls others counts once) and all aten calls, with `torch.profiler`, on
  the second call (the first call of the fused pipeline also builds its cached constant tables: counted apart);
- the time per view batch (one `make_views` call, both views), median of `--repeats` calls, in `--rounds`
  rounds that alternate the implementations; the ratio before/after is the median of the rounds' ratios. The
  previous implementation is timed with `sync_free=True` (the CUDA path, the one the call count is about) and
  with `False` (its row-selection path, what the trainer used on the CPU);
- the same parameters through both pipelines (the fused pipeline's draws, converted to the previous format):
  the maximum absolute difference of the normalized views (float rounding only);
- the same seed through both: other views (the draws were reorganised), as the mean absolute difference.

"Before" is the previous implementation, kept verbatim below (cosine_pitfalls/data.py as of commit 2fda120:
crop_boxes .. solarize, draw_aug_params .. augment and make_views; the RandAugment/AutoAugment functions did
not change and are imported). The machine may be shared: the load average (1 min) before and after is
recorded with the figures in <out>/augment_calls.json (other presets or batch sizes:
augment_calls_<presets>_b<batch>.json). `--device cuda` times and counts on a GPU (the device synchronized around
each timed call; <out>/augment_calls_cuda.json); the GPU's correctness checks are the `gpu` cell of
nbs/library/13_data.ipynb.
"""
import argparse, json, math, os, platform, statistics, sys, time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.profiler import ProfilerActivity, profile

import cosine_pitfalls.data as fused
from cosine_pitfalls.utils import atomic_write_text
from cosine_pitfalls.data import (AUG_PRESETS, AugSpec, _LUMA, _check_generator, _check_pair, _check_uint8_images,
                                  apply_policy, check_choice, draw_policy_params)

# ---------------------------------------------------------------------------------------------------------------
# The previous implementation (before issue 27), verbatim.
# ---------------------------------------------------------------------------------------------------------------
def crop_boxes(n: int,                        # number of boxes
               height: int,                   # image height H
               width: int,                    # image width W
               scale: tuple = (0.08, 1.0),    # area fraction range
               ratio: tuple = (3 / 4, 4 / 3),  # aspect (w/h) range, log-uniform
               generator: torch.Generator | None = None,  # random source; the boxes live on its device
              ) -> Tensor:                    # (n, 4) int64 rows (top, left, h, w)
    "Crop boxes distributed like torchvision's `RandomResizedCrop.get_params`, drawn for `n` samples at once."
    if not isinstance(n, int) or n < 0: raise ValueError(f"n must be a non-negative integer; got {n!r}")
    for name, v in (('height', height), ('width', width)):
        if not isinstance(v, int) or v < 1: raise ValueError(f"{name} must be a positive integer; got {v!r}")
    scale = _check_pair('scale', scale, 1.0, 'area fractions')
    ratio = _check_pair('ratio', ratio, math.inf, 'aspect ratios')
    dev = generator.device if generator is not None else torch.device('cpu')   # None: torch's global one
    u = torch.rand(n, 22, generator=generator, device=dev, dtype=torch.float64)  # (n, 22)
    # columns 0..9: areas of the 10 tries, 10..19: their aspects, 20 and 21: offsets
    area = height * width * (scale[0] + (scale[1] - scale[0]) * u[:, :10])    # (n, 10)
    lo, hi = math.log(ratio[0]), math.log(ratio[1])
    aspect = torch.exp(lo + (hi - lo) * u[:, 10:20])                          # (n, 10)
    w = torch.round(torch.sqrt(area * aspect))                                # (n, 10), half to even
    h = torch.round(torch.sqrt(area / aspect))                                # like Python's round
    ok = (w > 0) & (w <= width) & (h > 0) & (h <= height)                     # (n, 10)
    first = ok.to(torch.uint8).argmax(1, keepdim=True)                        # (n, 1) first valid try
    found = ok.any(1)                                                         # (n,)
    in_ratio = width / height                                                 # fallback: central crop
    if in_ratio < min(ratio): fw, fh = width, int(round(width / min(ratio)))
    elif in_ratio > max(ratio): fw, fh = int(round(height * max(ratio))), height
    else: fw, fh = width, height
    w = torch.where(found, w.gather(1, first).squeeze(1), float(fw))          # (n,)
    h = torch.where(found, h.gather(1, first).squeeze(1), float(fh))
    top = torch.where(found, torch.floor(u[:, 20] * (height - h + 1)), float((height - fh) // 2))
    left = torch.where(found, torch.floor(u[:, 21] * (width - w + 1)), float((width - fw) // 2))
    return torch.stack([top, left, h, w], 1).long()

# %% ../nbs/library/13_data.ipynb #d7a1c109
def resized_crop(x: Tensor,            # float images, (B, C, H, W)
                 boxes: Tensor,        # (B, 4) rows (top, left, h, w) in pixels
                 size: tuple[int, int],  # output (height, width)
                 flip: Tensor | None = None,  # (B,) bool: flip horizontally; None = no flips
                ) -> Tensor:           # (B, C, size[0], size[1])
    "Crop every image to its own box, flip where asked, resize: one `affine_grid` + bilinear `grid_sample`."
    if not isinstance(x, Tensor) or not x.is_floating_point() or x.dim() != 4:
        raise ValueError(f"x must be a floating-point tensor of shape (B, C, H, W); "
                         f"got {getattr(x, 'shape', x)!r}")
    if not isinstance(boxes, Tensor) or tuple(boxes.shape) != (x.shape[0], 4):
        raise ValueError(f"boxes must have shape (B, 4) = ({x.shape[0]}, 4); "
                         f"got {getattr(boxes, 'shape', boxes)!r}")
    B, C, H, W = x.shape
    top, left, h, w = boxes.to(device=x.device, dtype=x.dtype).unbind(1)     # (B,) each
    sx = w / W if flip is None else torch.where(flip.to(x.device), -w / W, w / W)
    theta = torch.zeros(B, 2, 3, dtype=x.dtype, device=x.device)            # (B, 2, 3) output -> input coords
    theta[:, 0, 0], theta[:, 0, 2] = sx, (2 * left + w) / W - 1
    theta[:, 1, 1], theta[:, 1, 2] = h / H, (2 * top + h) / H - 1
    grid = F.affine_grid(theta, [B, C, size[0], size[1]], align_corners=False)   # (B, S, S, 2)
    return F.grid_sample(x, grid, mode='bilinear', padding_mode='border', align_corners=False)

# %% ../nbs/library/13_data.ipynb #d7a1c10d
def _gray(x: Tensor) -> Tensor:
    "Luma `(B, 1, H, W)` of `x: (B, C, H, W)` (the image itself when C = 1)."
    if x.shape[1] == 1: return x
    r, g, b = x.unbind(1)
    return (_LUMA[0] * r + _LUMA[1] * g + _LUMA[2] * b).unsqueeze(1)

def _blend(x: Tensor, ref: Tensor, f: Tensor) -> Tensor:
    return (f * x + (1 - f) * ref).clamp_(0, 1)        # f: (B, 1, 1, 1); f = 1 returns x exactly

def adjust_hue(x: Tensor,  # RGB images in [0, 1], (B, 3, H, W)
               f: Tensor,  # (B,) hue shifts in turns, in [-0.5, 0.5]
              ) -> Tensor:  # (B, 3, H, W)
    "Rotate the HSV hue of every image by its own shift (torchvision's `adjust_hue`, batched)."
    r, g, b = x.unbind(1)                                                     # (B, H, W) each
    minc, maxc = torch.aminmax(x, dim=1)                                      # (B, H, W)
    c = maxc - minc
    cd = torch.where(c > 0, c, torch.ones_like(c))                            # gray pixels: any h, C = 0
    h6 = torch.where(maxc == r, (g - b) / cd, torch.where(maxc == g, (b - r) / cd + 2, (r - g) / cd + 4))
    h = torch.remainder(h6 / 6 + f.view(-1, 1, 1), 1.0).unsqueeze(1)          # (B, 1, H, W) shifted hue
    n = torch.tensor([5.0, 3.0, 1.0], dtype=x.dtype, device=x.device).view(1, 3, 1, 1)
    k = torch.remainder(n + 6 * h, 6.0)                                       # (B, 3, H, W)
    return maxc.unsqueeze(1) - c.unsqueeze(1) * torch.minimum(k, 4 - k).clamp(0, 1)

def _brightness(x, f): return (x * f).clamp_(0, 1)
def _contrast(x, f): return _blend(x, _gray(x).mean((1, 2, 3), keepdim=True), f)
def _saturation(x, f): return x if x.shape[1] == 1 else _blend(x, _gray(x), f)
def _hue(x, f): return x if x.shape[1] == 1 else adjust_hue(x, f.view(-1))
JITTER_OPS = ('brightness', 'contrast', 'saturation', 'hue')   # torchvision's ColorJitter op indices 0..3
_JITTER_FNS = (_brightness, _contrast, _saturation, _hue)

# %% ../nbs/library/13_data.ipynb #d7a1c10f
def _apply_rows(x: Tensor, sel: Tensor, fn, f: Tensor, sync_free: bool) -> Tensor:
    "x with `fn(x, f)` on the rows where `sel` is True."
    if sync_free:
        return torch.where(sel.view(-1, 1, 1, 1), fn(x, f.view(-1, 1, 1, 1)), x)
    idx = sel.nonzero().squeeze(1)                                            # (k,) host sync: fine on CPU
    if len(idx) == 0: return x
    return x.index_copy(0, idx, fn(x.index_select(0, idx), f[idx].view(-1, 1, 1, 1)))

def color_jitter(x: Tensor,        # images in [0, 1], (B, C, H, W), C in (1, 3)
                 factors: Tensor,  # (B, 4) brightness, contrast, saturation factors and hue shift
                 order: Tensor,    # (B, 4) a permutation of 0..3 per sample (JITTER_OPS indices)
                 active: Tensor,   # (B,) bool: jitter this sample at all
                 ops: tuple = (True, True, True, True),  # which of the four operations to run
                 sync_free: bool | None = None,  # True: torch.where; False: index rows; None: True on CUDA
                ) -> Tensor:       # (B, C, H, W) in [0, 1]
    "Colour jitter with per-sample factors and a per-sample random order of the four operations."
    if sync_free is None: sync_free = x.device.type != 'cpu'
    for r in range(4):
        for k in range(4):
            if ops[k]:
                x = _apply_rows(x, active & (order[:, r] == k), _JITTER_FNS[k], factors[:, k], sync_free)
    return x

# %% ../nbs/library/13_data.ipynb #d7a1c113
SOLARIZE_THRESHOLD = 0.5   # BYOL: x -> x if x < 0.5 else 1 - x

def blur_kernel_size(side: int,  # output side in pixels
                    ) -> int:    # odd kernel side >= 3
    "Gaussian blur kernel side: round(0.1 * side), made odd, at least 3."
    k = int(round(0.1 * side))
    return max(3, k if k % 2 else k + 1)

def gaussian_blur(x: Tensor,       # images, (B, C, H, W)
                  sigma: Tensor,   # (B,) per-sample sigma in pixels
                  active: Tensor,  # (B,) bool: blur this sample
                  kernel_size: int,  # odd kernel side
                 ) -> Tensor:      # (B, C, H, W)
    "Per-sample Gaussian blur as a separable grouped convolution with reflect padding."
    B, C, H, W = x.shape
    half = kernel_size // 2
    t = torch.arange(kernel_size, dtype=x.dtype, device=x.device) - half                # (k,)
    ker = torch.exp(-0.5 * (t / sigma.to(x.dtype).view(-1, 1)) ** 2)                   # (B, k)
    ker = torch.where(active.view(-1, 1), ker / ker.sum(1, keepdim=True), (t == 0).to(x.dtype))
    w = ker.repeat_interleave(C, 0)                                                     # (B*C, k)
    y = F.pad(x.reshape(1, B * C, H, W), (half, half, half, half), mode='reflect')
    y = F.conv2d(y, w.view(B * C, 1, kernel_size, 1), groups=B * C)                     # vertical
    y = F.conv2d(y, w.view(B * C, 1, 1, kernel_size), groups=B * C)                     # horizontal
    return y.view(B, C, H, W)

def solarize(x: Tensor,       # images in [0, 1], (B, C, H, W)
             active: Tensor,  # (B,) bool
            ) -> Tensor:      # (B, C, H, W)
    "Invert the pixels >= 0.5 of the active samples."
    return torch.where(active.view(-1, 1, 1, 1) & (x >= SOLARIZE_THRESHOLD), 1 - x, x)

# %% ../nbs/library/13_data.ipynb #d7a1c301
def draw_aug_params(n: int,            # batch size
                    height: int,       # input height
                    width: int,        # input width
                    spec: AugSpec,     # the policy
                    generator: torch.Generator,  # random source; the parameters live on its device
                   ) -> dict[str, Tensor]:  # per-sample parameters, first dimension n
    "Draw every random parameter of one augmented view of `n` images."
    if not isinstance(spec, AugSpec): raise ValueError(f"spec must be an AugSpec; got {type(spec).__name__}")
    if not isinstance(generator, torch.Generator):
        raise ValueError(f"generator must be a torch.Generator; got {type(generator).__name__}")
    dev = generator.device
    box = crop_boxes(n, height, width, spec.scale, spec.ratio, generator)        # (n, 4) top, left, h, w
    u = torch.rand(n, 10, generator=generator, device=dev)                        # (n, 10)
    order = torch.argsort(torch.rand(n, 4, generator=generator, device=dev), 1)  # (n, 4) uniform permutations
    lo_ = lambda a: max(0.0, 1 - a)
    rng = lambda a, col: lo_(a) + (1 + a - lo_(a)) * u[:, col]                     # in [max(0, 1-a), 1+a]
    factors = torch.stack([rng(spec.brightness, 3), rng(spec.contrast, 4), rng(spec.saturation, 5),
                           spec.hue * (2 * u[:, 6] - 1)], 1)                      # (n, 4)
    s0, s1 = spec.blur_sigma
    params = dict(box=box, flip=u[:, 0] < spec.flip_p, jitter=u[:, 1] < spec.jitter_p, factors=factors,
                  order=order,
                  gray=u[:, 2] < spec.gray_p, blur=u[:, 7] < spec.blur_p, sigma=s0 + (s1 - s0) * u[:, 8],
                  solarize=u[:, 9] < spec.solarize_p)
    if spec.policy: params.update(draw_policy_params(n, spec, generator))   # last: other streams unchanged
    return params

def _norm_params(mean, std, c: int, device) -> tuple[Tensor, Tensor]:
    "mean and std as (1, C, 1, 1) float tensors, checked."
    for name, v in (('mean', mean), ('std', std)):
        if not isinstance(v, (tuple, list)) or len(v) != c or not all(isinstance(a, (int, float)) for a in v):
            raise ValueError(f"{name} must be a tuple of {c} numbers (one per channel, [0, 1] units); "
                             f"got {v!r}")
    if min(std) <= 0: raise ValueError(f"std must be positive per channel; got {std!r}")
    return (torch.tensor(mean, dtype=torch.float32, device=device).view(1, c, 1, 1),
            torch.tensor(std, dtype=torch.float32, device=device).view(1, c, 1, 1))

# %% ../nbs/library/13_data.ipynb #d7a1c117
def apply_aug(x: Tensor,              # uint8 images, (B, C, H, W)
              params: dict[str, Tensor],  # from draw_aug_params(B, H, W, spec, generator)
              spec: AugSpec,          # the policy the parameters were drawn for
              mean: tuple,            # per-channel mean, [0, 1] units
              std: tuple,             # per-channel std, [0, 1] units
              sync_free: bool | None = None,  # policy and jitter without host syncs; None: True on CUDA
             ) -> Tensor:             # (B, C, S, S) float32, normalized
    "Apply drawn parameters: policy, crop + flip + resize, jitter, gray, blur, solarize, normalize."
    B, C, H, W = x.shape
    m, s = _norm_params(mean, std, C, x.device)
    size = (spec.size, spec.size) if spec.size is not None else (H, W)
    p = {k: v.to(x.device) for k, v in params.items()}
    if spec.policy: x = apply_policy(x, p, spec, sync_free)                                # uint8, before the crop
    y = resized_crop(x.float().div_(255), p['box'], size, p['flip'])            # (B, C, S, S) in [0, 1]
    ops = (spec.brightness > 0, spec.contrast > 0, spec.saturation > 0 and C == 3, spec.hue > 0 and C == 3)
    if spec.jitter_p > 0 and any(ops): y = color_jitter(y, p['factors'], p['order'], p['jitter'], ops,
                                                             sync_free)
    if spec.gray_p > 0 and C == 3: y = torch.where(p['gray'].view(-1, 1, 1, 1), _gray(y).expand_as(y), y)
    if spec.blur_p > 0: y = gaussian_blur(y, p['sigma'], p['blur'], blur_kernel_size(min(size)))
    if spec.solarize_p > 0: y = solarize(y, p['solarize'])
    return (y - m) / s

def augment(x: Tensor,          # uint8 images, (B, C, H, W), C in (1, 3)
            spec: AugSpec,      # the policy
            generator: torch.Generator,  # random source on x's device (its state is what a checkpoint saves)
            mean: tuple,        # per-channel mean, [0, 1] units (ImageData.mean)
            std: tuple,         # per-channel std, [0, 1] units (ImageData.std)
            sync_free: bool | None = None,  # policy and jitter without host syncs; None: True on CUDA
           ) -> Tensor:         # (B, C, S, S) float32, normalized; S = spec.size or the input's H x W
    "One augmented view of a batch, every sample with its own random parameters; no loop over samples."
    _check_uint8_images(x)
    if not isinstance(spec, AugSpec): raise ValueError(f"spec must be an AugSpec; got {type(spec).__name__}")
    _check_generator(generator, x.device)
    _norm_params(mean, std, x.shape[1], 'cpu')
    return apply_aug(x, draw_aug_params(x.shape[0], x.shape[2], x.shape[3], spec, generator), spec, mean, std,
                     sync_free)

# %% ../nbs/library/13_data.ipynb #d7a1c11d
def make_views(x: Tensor,          # uint8 images, (B, C, H, W)
               preset: str | tuple,  # a key of AUG_PRESETS, or a tuple of AugSpecs (one per view)
               generator: torch.Generator,  # random source on x's device
               mean: tuple,        # per-channel mean, [0, 1] units
               std: tuple,         # per-channel std, [0, 1] units
               sync_free: bool | None = None,  # policy and jitter without host syncs; None: True on CUDA
              ) -> list[Tensor]:   # one (B, C, S, S) float32 view per policy
    "The augmented views of a batch, one per policy of the preset, drawn one after the other."
    if isinstance(preset, str): specs = AUG_PRESETS[check_choice('preset', preset, AUG_PRESETS)]
    elif isinstance(preset, (tuple, list)) and len(preset) and all(isinstance(s, AugSpec) for s in preset):
        specs = tuple(preset)
    else: raise ValueError(f"preset must be one of {', '.join(map(repr, AUG_PRESETS))} "
                           f"or a tuple of AugSpecs; "
                           f"got {preset!r}")
    return [augment(x, s, generator, mean, std, sync_free) for s in specs]

# %% ../nbs/library/13_data.ipynb #d7a1c202

# ---------------------------------------------------------------------------------------------------------------
# Measurements
# ---------------------------------------------------------------------------------------------------------------
SYNCS = {'aten::item', 'aten::_local_scalar_dense', 'aten::nonzero', 'aten::masked_select', 'aten::unique',
         'aten::_unique2', 'aten::bincount', 'aten::is_nonzero'}


def aten_calls(fn) -> dict:
    "Top-level and all aten calls of one call of fn, and whether any of them reads a value back to the host."
    with profile(activities=[ProfilerActivity.CPU]) as prof: fn()
    ev = [e for e in prof.events() if e.name.startswith('aten::')]
    top = [e for e in ev if e.cpu_parent is None or not e.cpu_parent.name.startswith('aten::')]
    return dict(top=len(top), nested=len(ev), host_reads=sorted({e.name for e in ev} & SYNCS))


def clear_fused_caches() -> None:
    for f in (fused._draw_tables, fused._crop_tables, fused._jitter_tables, fused._blur_tables, fused._apply_tables):
        f.cache_clear()


def median_ms(fn, repeats: int, device=torch.device('cpu')) -> float:
    ts, sync = [], (lambda: torch.cuda.synchronize(device)) if device.type == 'cuda' else (lambda: None)
    fn(); sync()                                                   # one call first: kernels loaded, caches built
    for _ in range(repeats):
        sync(); t0 = time.perf_counter(); fn(); sync(); ts.append(time.perf_counter() - t0)
    return 1e3 * statistics.median(ts)


def batch(preset: str, n: int, seed: int = 0):
    "uint8 images of the preset's training shape (digits: 1 x 16 x 16, else 3 x 32 x 32), and mean/std."
    c, s = (1, 16) if preset == 'digits' else (3, 32)
    x = (torch.rand(n, c, s, s, generator=torch.Generator().manual_seed(seed)) * 255).to(torch.uint8)
    mean, std = ((0.3,), (0.35,)) if c == 1 else ((0.49, 0.48, 0.45), (0.25, 0.24, 0.26))
    return x, mean, std


def same_params_diff(x, preset, mean, std) -> float:
    "Max |fused - previous| over the views, both applying the fused pipeline's parameters of one draw."
    specs = AUG_PRESETS[preset]
    B, C, H, W = x.shape
    p = fused._draw(B, H, W, specs, torch.Generator().manual_seed(0))
    z = fused._apply(x.repeat(len(specs), 1, 1, 1), p, specs, mean, std, (H, W))
    L, worst = p['L'][:, 0], 0.0
    for v, spec in enumerate(specs):
        r = slice(v * B, (v + 1) * B)
        old = dict(box=p['box'][r, 0].long(), factors=L[r, fused._FAC:fused._FAC + 4],
                   order=p['pos'][r, 0].argsort(-1), sigma=L[r, fused._SIG],
                   **{k: p[k][r].view(B) for k in ('flip', 'jitter', 'gray', 'blur', 'solarize')})
        worst = max(worst, float((z[r] - apply_aug(x, old, spec, mean, std, True)).abs().max()))
    return worst


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--batch', type=int, default=512)
    ap.add_argument('--repeats', type=int, default=9, help='calls per timing (median)')
    ap.add_argument('--rounds', type=int, default=3, help='alternating rounds (median of the ratios)')
    ap.add_argument('--threads', type=int, default=0, help='torch threads (0: torch default)')
    ap.add_argument('--presets', default='simclr,byol,margins,digits', help='comma-separated AUG_PRESETS keys')
    ap.add_argument('--policies', action='store_true', help='also the randaugment and autoaugment presets')
    ap.add_argument('--device', default='cpu', help="'cpu' or 'cuda'")
    ap.add_argument('--out', default='outputs/benchmarks')
    a = ap.parse_args(argv)
    try: dev = torch.device(a.device)
    except RuntimeError: ap.error(f"--device must be 'cpu', 'cuda' or 'cuda:N'; got {a.device!r}")
    if dev.type not in ('cpu', 'cuda'): ap.error(f"--device must be 'cpu', 'cuda' or 'cuda:N'; got {a.device!r}")
    if a.batch < 1 or a.repeats < 1 or a.rounds < 1: ap.error('--batch, --repeats and --rounds must be >= 1')
    if a.threads: torch.set_num_threads(a.threads)
    presets = a.presets.split(',') + (['randaugment', 'autoaugment'] if a.policies else [])
    for name in presets: check_choice('preset', name, AUG_PRESETS)
    load0 = os.getloadavg()[0]
    res = {}
    for name in presets:
        x, mean, std = batch(name, a.batch)
        x_cpu, x = x, x.to(dev)
        g = torch.Generator(device=dev).manual_seed(0)
        before = lambda sf=True: make_views(x, name, g, mean, std, sync_free=sf)
        after = lambda: fused.make_views(x, name, g, mean, std, sync_free=True)
        clear_fused_caches()
        first = aten_calls(after)
        r = dict(shape=list(x.shape), calls_before=(before(), aten_calls(before))[1],
                 calls_after=aten_calls(after), calls_after_first_call=first)
        rounds = []
        for _ in range(a.rounds):                                  # alternate, so that drifting load hits both
            t_b = median_ms(before, a.repeats, dev); t_bf = median_ms(lambda: before(False), a.repeats, dev)
            t_a = median_ms(after, a.repeats, dev)
            rounds.append((t_b, t_bf, t_a))
        tb, tbf, ta = (statistics.median(c) for c in zip(*rounds))
        r.update(ms_before=tb, ms_before_sync_free_false=tbf, ms_after=ta,
                 ratio=statistics.median(b / f for b, _, f in rounds),
                 ratio_vs_sync_free_false=statistics.median(b / f for _, b, f in rounds), rounds_ms=rounds)
        x = x_cpu                                       # the equivalence checks on the CPU, as before
        if not AUG_PRESETS[name][0].policy:
            r['max_abs_diff_same_params'] = same_params_diff(x, name, mean, std)
            vb = make_views(x, name, torch.Generator().manual_seed(0), mean, std)
            va = fused.make_views(x, name, torch.Generator().manual_seed(0), mean, std)
            r['mean_abs_diff_same_seed'] = statistics.mean(float((u - v).abs().mean()) for u, v in zip(vb, va))
        res[name] = r
    load1 = os.getloadavg()[0]
    out = dict(benchmark='augment_calls', issue=27, torch=torch.__version__, threads=torch.get_num_threads(),
               cpu=f'{platform.processor() or platform.machine()}, {os.cpu_count()} cores',
               device=torch.cuda.get_device_name(dev) if dev.type == 'cuda' else 'cpu', batch=a.batch,
               repeats=a.repeats, rounds=a.rounds, loadavg_1min_before=load0, loadavg_1min_after=load1,
               presets=res)
    tag = '' if a.presets == ap.get_default('presets') else '_' + '-'.join(a.presets.split(','))
    tag += '' if dev.type == 'cpu' else '_cuda'
    path = Path(a.out)/f'augment_calls{tag}{"" if a.batch == 512 else f"_b{a.batch}"}.json'
    atomic_write_text(path, json.dumps(out, indent=1))
    print(f"{out['device']}: CPU ({out['cpu']}), torch {torch.__version__}, {out['threads']} threads, batch {a.batch}; "
          f"load average (1 min) {load0:.1f} before, {load1:.1f} after; "
          f"medians of {a.repeats} calls x {a.rounds} rounds")
    print(f"{'preset':12s} {'aten calls (top / all)':>28s}   {'ms per view batch (both views)':>34s}"
          f"   same params")
    print(f"{'':12s} {'before':>13s} {'after':>14s}   {'before':>8s} {'(CPU path)':>10s} {'after':>7s} "
          f"{'ratio':>6s}   max |diff|")
    for name, r in res.items():
        cb, ca = r['calls_before'], r['calls_after']
        print(f"{name:12s} {cb['top']:5d} / {cb['nested']:5d} {ca['top']:5d} / {ca['nested']:5d}   "
              f"{r['ms_before']:8.1f} {r['ms_before_sync_free_false']:10.1f} {r['ms_after']:7.1f} "
              f"{r['ratio']:5.2f}x   {r.get('max_abs_diff_same_params', float('nan')):.1e}")
    print("first call (builds the cached tables): "
          + ', '.join(f"{k} {r['calls_after_first_call']['top']}" for k, r in res.items()))
    bad = {k: r['calls_after']['host_reads'] for k, r in res.items() if r['calls_after']['host_reads']}
    print(f"host reads in the fused views: {bad or 'none'}  -> {path}")
    return 0


if __name__ == '__main__':
    sys.exit(main())
