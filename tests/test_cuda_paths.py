"""The CUDA code path, run on the CPU: bf16 autocast (on the CPU), channels-last, sync-free augmentation, the data
off the device and `torch.compile` -- for every method and mechanism, against the fp32 path (issue 20, point 2)."""
import dataclasses, math

import pytest
import torch

from cosine_pitfalls.data import load_dataset, make_views
from cosine_pitfalls.models import PROJECTORS
from cosine_pitfalls.methods import METHODS
from cosine_pitfalls.train import DeviceChoices, TrainConfig, build_model, device_choices, train

SMALL = dict(dataset='digits', width=8, head_width=32, head_out=16, batch_size=32, epochs=1, steps_per_epoch=2,
             eval_every=0, diag_samples=32, knn_k=10, probe_epochs=2, show_progress=False, threads=1,
             queue_size=128, dino_out=64)
CUDA_ON_CPU = DeviceChoices(autocast='cpu', channels_last=True, compile=False, sync_free=True, data_on_device=False)
FP32 = device_choices(TrainConfig(), torch.device('cpu'))

MECHANISMS = {   # name -> TrainConfig fields: margins Algs 2-6, L_VRNS, CLOP in every variant, DirectCLR's projectors
    'margins_alg2': dict(method='simclr', m1=0.2, m2=0.1), 'margins_alg3': dict(method='simclr', pos_scale=2.5),
    'margins_alg3_curv': dict(method='moco_v3', pos_scale=2.5, curvature=0.7),
    'margins_alg4': dict(method='simclr', ratio_m1=0.4), 'margins_alg5': dict(method='simclr', attenuation='I', alpha=0.5),
    'margins_alg6': dict(method='moco_v2', attenuation='II', alpha=0.5), 'byol_curv': dict(method='byol', curvature=2.5),
    'vrns': dict(method='simclr', vrns_weight=3.0),
    **{f'clop_{p}_{s}_{w}': dict(method='supcon', clop_weight=1.0, clop_prototypes=p, clop_similarity=s,
                                 clop_weighting=w)
       for p in ('orthonormal', 'etf') for s in ('cosine', 'euclidean', 'manhattan') for w in ('mean', 'literal')},
    'clop_semi': dict(method='simclr', clop_weight=1.0, label_frac=0.1),
    **{f'clop_raw_{s}': dict(method='supcon', clop_weight=1.0, clop_similarity=s, clop_normalize=False)
       for s in ('euclidean', 'manhattan')},   # the similarity on z as given (section 3's), not on ẑ
    **{f'projector_{p}': dict(method='simclr', projector=p, d0=4) for p in PROJECTORS},
    'directclr': dict(method='directclr', d0=4), 'directclr_random': dict(method='directclr', d0=4, random_subset=True),
}
CASES = {**{m: dict(method=m, **(dict(d0=4) if m == 'directclr' else {})) for m in METHODS}, **MECHANISMS}


@pytest.fixture(scope='module')
def digits(): return load_dataset('digits')


def _forward(cfg, data, autocast):
    model = build_model(cfg, data.num_classes, len(data.train_x), 1)
    if autocast: model = model.to(memory_format=torch.channels_last)
    g = torch.Generator().manual_seed(0)
    views = make_views(data.train_x[:32], cfg.preset(), g, data.mean, data.std, sync_free=autocast)
    if autocast: views = [v.contiguous(memory_format=torch.channels_last) for v in views]
    with torch.autocast('cpu', torch.bfloat16, enabled=autocast): o = model(views, data.train_y[:32])
    o.loss.backward()
    return model, o


@pytest.mark.parametrize('name', list(CASES))
def test_bf16_step_matches_fp32(name, digits):
    "One step's loss under bf16 autocast within bf16 tolerance of fp32; loss, terms, grads and buffers fp32, finite."
    torch.set_num_threads(1)
    cfg = TrainConfig(**{**SMALL, **CASES[name]})
    ref, o_ref = _forward(cfg, digits, False)
    model, o = _forward(cfg, digits, True)
    a, b = float(o.loss), float(o_ref.loss)
    assert o.loss.dtype == torch.float32 and math.isfinite(a)
    assert abs(a - b) <= 0.03 * abs(b) + 0.03, (name, a, b)
    for k, v in o.terms.items(): assert v.dtype == torch.float32 and torch.isfinite(v).all(), (name, k)
    for n, p in model.named_parameters():
        if p.grad is not None: assert p.grad.dtype == torch.float32 and torch.isfinite(p.grad).all(), (name, n)
    for n, buf in model.named_buffers():
        if buf.is_floating_point(): assert buf.dtype == torch.float32 and torch.isfinite(buf).all(), (name, n)


@pytest.mark.parametrize('method', METHODS)
def test_train_takes_the_cuda_path_on_cpu(method, digits, tmp_path):
    "train() with the CUDA choices forced (bf16 on the CPU, channels-last, sync-free views, data off the device)."
    torch.set_num_threads(1)
    cfg = TrainConfig(**{**SMALL, **CASES[method], 'out_dir': str(tmp_path/'cuda')})
    ref = train(dataclasses.replace(cfg, out_dir=str(tmp_path/'fp32')), data=digits, choices=FP32)
    ds = train(cfg, data=digits, choices=CUDA_ON_CPU)
    a, b = ds.step_loss.values.ravel(), ref.step_loss.values.ravel()
    assert all(math.isfinite(x) for x in a)
    assert abs(a[0] - b[0]) <= 0.03 * abs(b[0]) + 0.03, (method, a, b)          # the first step: the same weights
    assert ds.attrs['precision'] == 'bf16 autocast (cpu)' and ds.attrs['channels_last'] == 1
    assert ref.attrs['precision'] == 'fp32' and ref.attrs['cuda_version'] == 'null'


@pytest.mark.parametrize('preset', ['simclr', 'byol', 'randaugment', 'autoaugment', 'digits'])
def test_sync_free_views_are_bit_for_bit(preset, digits):
    x = digits.train_x[:48].expand(-1, 3, -1, -1).contiguous() if preset != 'digits' else digits.train_x[:48]
    m, s = (digits.mean * (3 if preset != 'digits' else 1)), (digits.std * (3 if preset != 'digits' else 1))
    a = make_views(x, preset, torch.Generator().manual_seed(1), m, s, sync_free=True)
    b = make_views(x, preset, torch.Generator().manual_seed(1), m, s, sync_free=False)
    assert all(torch.equal(u, v) for u, v in zip(a, b))


HOST_READS = {'aten::item', 'aten::_local_scalar_dense', 'aten::nonzero', 'aten::masked_select', 'aten::unique',
              'aten::_unique2', 'aten::bincount', 'aten::is_nonzero'}


@pytest.mark.parametrize('preset', ['simclr', 'byol', 'margins', 'digits', 'none'])
def test_views_are_a_few_ops_and_read_nothing_back(preset, digits):
    """The fused views (issue 27): two views in <= 100 top-level aten calls (after the call that builds the cached
    tables), and no op that reads a value back to the host (`item`, `nonzero`, ...): no device sync on any device."""
    from torch.profiler import ProfilerActivity, profile
    x = digits.train_x[:48].expand(-1, 3, -1, -1).contiguous() if preset != 'digits' else digits.train_x[:48]
    m, s = (digits.mean * (3 if preset != 'digits' else 1)), (digits.std * (3 if preset != 'digits' else 1))
    g = torch.Generator().manual_seed(1)
    make_views(x, preset, g, m, s, sync_free=True)
    with profile(activities=[ProfilerActivity.CPU]) as prof: views = make_views(x, preset, g, m, s, sync_free=True)
    ev = [e for e in prof.events() if e.name.startswith('aten::')]
    top = [e for e in ev if e.cpu_parent is None or not e.cpu_parent.name.startswith('aten::')]
    assert len(top) <= 100, (preset, len(top))
    assert not {e.name for e in ev} & HOST_READS, {e.name for e in ev} & HOST_READS
    assert [tuple(v.shape) for v in views] == [tuple(x.shape)] * 2 and all(torch.isfinite(v).all() for v in views)


def test_compiled_run_with_record_init_has_no_graph_break(digits, tmp_path):
    """torch.compile of the training step with the epoch-0 record and a kNN every epoch (both on the eager network:
    calibrate_bn's momentum=None never reaches the compiled graph): no graph break, one graph (the step), no recompile.
    Dynamo's graph breaks do not depend on the backend: aot_eager keeps the test short."""
    torch._dynamo.reset()
    from torch._dynamo.utils import counters
    counters.clear()
    cfg = TrainConfig(**{**SMALL, 'method': 'simclr', 'record_init': True, 'compile': True, 'eval_every': 1})
    ds = train(cfg, data=digits, choices=dataclasses.replace(CUDA_ON_CPU, compile='aot_eager'))
    assert ds.attrs['compiled'] == 1 and all(math.isfinite(x) for x in ds.step_loss.sel(epoch=1).values)  # 0: init
    assert sum(counters['graph_break'].values()) == 0, dict(counters['graph_break'])
    assert counters['stats']['unique_graphs'] == 1, dict(counters['stats'])
