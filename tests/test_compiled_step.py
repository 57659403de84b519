"""The training step under `torch.compile` computes what the eager step computes (issue 27, points 2 and 3).

`TrainConfig.compile` compiles the whole step's network (backbone, heads, loss); the epoch-0 record, diagnostics and
kNN keep the eager network. On the CPU: every method and a set of mechanisms through aot_eager (dynamo's graph and
AOTAutograd's forward and backward, run by eager kernels: one graph, no break, the per-step losses bit for bit), and
one method through inductor (its own C++ kernels: equal to float tolerance). CUDA graphs (`'reduce-overhead'`) need a
GPU: `benchmarks/train_throughput.py --compile reduce-overhead` ran them on an H200 (the note of issue 27). A compiled
run is another run (its own run id): over hundreds of steps its numbers part from eager's.
"""
import dataclasses, math

import numpy as np
import pytest
import torch

from cosine_pitfalls.data import load_dataset
from cosine_pitfalls.methods import METHODS
from cosine_pitfalls.train import COMPILE_MODES, TrainConfig, compile_step, device_choices, train

SMALL = dict(dataset='digits', width=8, head_width=32, head_out=16, batch_size=32, epochs=1, steps_per_epoch=5,
             eval_every=0, diag_samples=32, knn_k=10, show_progress=False, threads=1, queue_size=128, dino_out=64)
CASES = {**{m: dict(method=m, **(dict(d0=4) if m == 'directclr' else {})) for m in METHODS},
         'margins_alg3_curv': dict(method='moco_v3', pos_scale=2.5, curvature=0.7),
         'vrns': dict(method='simclr', vrns_weight=3.0),
         'clop_semi': dict(method='simclr', clop_weight=1.0, label_frac=0.1),
         'cut_init': dict(method='byol', cut_c=4.0)}


@pytest.fixture(scope='module')
def digits(): return load_dataset('digits')


def _losses(cfg, data, compile):
    from torch._dynamo.utils import counters
    torch._dynamo.reset(); counters.clear()
    choices = dataclasses.replace(device_choices(cfg, torch.device('cpu')), compile=compile)
    ds = train(cfg, data=data, choices=choices)
    breaks = sum(counters['graph_break'].values())
    return ds.step_loss.values.ravel(), ds, breaks, counters['stats']['unique_graphs']


@pytest.mark.parametrize('case', list(CASES))
def test_compiled_step_equals_eager(digits, case):
    "aot_eager: one graph for the whole step, no graph break, the same per-step losses as eager (5 steps)."
    cfg = TrainConfig(**{**SMALL, **CASES[case]})
    eager, *_ = _losses(cfg, digits, False)
    comp, ds, breaks, graphs = _losses(cfg, digits, 'aot_eager')
    assert breaks == 0 and graphs == 1, (breaks, graphs)
    assert ds.attrs['compiled'] == 1 and np.isfinite(comp).all()
    np.testing.assert_array_equal(comp, eager)


@pytest.mark.parametrize('how', [True, 'reduce-overhead'])
def test_inductor_step_equals_eager_to_float_tolerance(digits, how):
    """inductor's CPU kernels (what `compile=True` runs on the CPU) reorder float sums: the per-step losses agree to
    float tolerance, not bit for bit (measured: 9.1e-6 at most on SimCLR's ~4.2 over 5 steps). 'reduce-overhead'
    runs the trainer's CUDA-graph path (a step marker per step, the step losses copied out); on the CPU inductor
    records no graph, so the same kernels run."""
    cfg = TrainConfig(**{**SMALL, 'method': 'simclr'})
    eager, *_ = _losses(cfg, digits, False)
    comp, ds, breaks, _ = _losses(cfg, digits, how)
    assert breaks == 0 and ds.attrs['compiled'] == 1
    np.testing.assert_allclose(comp, eager, rtol=1e-5, atol=0)


def test_compile_modes_refused_or_passed(digits):
    "compile takes True/False or one of torch.compile's modes; anything else is refused before anything runs."
    for bad in ('fast', 'inductor', 1, None):
        with pytest.raises(ValueError, match="compile must be True, False or one of 'default', 'reduce-overhead'"):
            TrainConfig(**{**SMALL, 'compile': bad})
    for mode in COMPILE_MODES: TrainConfig(**{**SMALL, 'compile': mode})
    net = torch.nn.Linear(2, 2)
    assert compile_step(net, 'aot_eager')._orig_mod is net   # a backend's name (the tests'), the same parameters


def test_a_compiled_run_is_another_run(tmp_path):
    "compile is part of a run's identity: its numbers part from eager's over many steps, so no folder is shared."
    from cosine_pitfalls.train import config_changes
    ids = {how: TrainConfig(**{**SMALL, 'compile': how}).run_id() for how in (False, True, 'reduce-overhead')}
    assert len(set(ids.values())) == 3, ids
    eager, comp = (dataclasses.asdict(TrainConfig(**{**SMALL, 'compile': how})) for how in (False, True))
    assert any('compile' in c for c in config_changes(comp, eager)), config_changes(comp, eager)
