"""The numbers of the 11 methods and of 14 mechanism mixes, bit for bit (issue 26): each trains 5 steps on the
embedded digits through the public `train`, on the CPU with one thread and a fixed seed; its per-step losses, its
epoch's loss terms (as `float.hex`) and its final weights (sha256) must equal those recorded in `tests/data/` by
the code before the refactor into one class per method; the state_dict's names and shapes too, so that checkpoints
of the old code load with `strict=True`. `_setup` and `_epoch` are `train`'s own parts (its final kNN skipped).

The four NT-Xent forms (`losses.info_nce`, `losses.two_view_contrast`, `mechanisms.nt_xent`,
`mechanisms.nt_xent_anchors`) are recorded too, value and input gradient, on fixed float32 inputs. Since they call
one core (`mechanisms.nt_xent_logits`, the arithmetic of `contrastive_loss`, which the methods train with, kept bit
for bit), `info_nce`'s and `nt_xent`'s `terms='both'` moved by at most 1 ulp in value (2.4e-7 / 4.8e-7 here) and
3e-8 in the gradient (log-sum-exp minus the positive, where they took a log-softmax): re-recorded then.

The bits are those of one kind of machine: the test process computes under the `cpu` profile's pins (one thread,
AVX2 kernels: set by `conftest.py` before torch loads, whatever the machine's best instruction set), and the record
is kept by the instruction set and the CPU's vendor (`conftest.isa_key`, as `test_reproducible.py`), because MKL
takes its own paths on each vendor's CPUs whatever the pins: 'AVX2 AMD' was recorded by the code before the
refactor, 'AVX2 Intel' by today's code (the same code that matches the AMD record bit for bit on AMD machines).
Pinned to AVX2, an Intel CPU's losses differ from AMD's by up to 2e-4 relative after 5 steps (9.6e-3 for one
CLOP term near zero), so no tolerance would tell a changed method from another vendor: on a machine whose kind
has no record the losses and weights are not compared (skipped, saying so); the state_dict's names and shapes,
which do not depend on the machine, are compared everywhere.

Record this machine's kind (only where a change of the numbers is intended, and say so in the commit):

    python tests/test_method_losses.py --record
"""
import hashlib, json, sys
from pathlib import Path

import pytest

if __name__ == '__main__': import conftest    # --record: pinned as the tests are, before torch loads
import torch

HERE = Path(__file__).resolve().parent
LOSSES = HERE/'data'/'method_losses.json'
BASE = dict(dataset='digits', image_size=8, backbone='small_cnn', width=8, batch_size=64, head_width=32, head_out=16,
            queue_size=256, dino_out=16, epochs=1, steps_per_epoch=5, eval_every=0, diag_samples=64, knn_k=20,
            device='cpu', seed=0, show_progress=False, checkpoint_every=0)
METHODS = ('simclr', 'dcl', 'supcon', 'moco_v2', 'moco_v3', 'byol', 'simsiam', 'dino', 'barlow_twins', 'vicreg',
           'directclr')
RUNS = {m: dict(method=m) for m in METHODS}
RUNS['directclr']['d0'] = 4
RUNS.update({                                             # every mechanism on every family that accepts it
    'simclr+cut': dict(method='simclr', cut_c=3.0),
    'simclr+vrns': dict(method='simclr', vrns_weight=0.5),
    'simclr+clop': dict(method='simclr', clop_weight=0.5, label_frac=0.5),
    'simclr+alg3': dict(method='simclr', pos_scale=2.0, curvature=1.0),
    'simclr+repulsion': dict(method='simclr', simclr_terms='repulsion'),
    'dcl+vrns': dict(method='dcl', vrns_weight=0.5),
    'moco_v2+alg2': dict(method='moco_v2', m1=0.1, m2=0.1),
    'moco_v3+alg6': dict(method='moco_v3', attenuation='II', alpha=0.5),
    'byol+cut+alg4': dict(method='byol', cut_c=2.0, ratio_m1=0.2),
    'supcon+clop_etf': dict(method='supcon', clop_weight=0.5, label_frac=0.5, clop_prototypes='etf'),
    'directclr+subset+vrns': dict(method='directclr', d0=4, random_subset=True, vrns_weight=0.5),
    'dino+clop': dict(method='dino', clop_weight=0.5),
    'simsiam+cut': dict(method='simsiam', cut_c=3.0),
    'barlow_twins+clop_literal': dict(method='barlow_twins', clop_weight=0.5, clop_weighting='literal'),
})


def run(name: str) -> tuple[dict, dict]:
    "Train one recorded run; its losses as float.hex, its final weights' sha256 and their names and shapes."
    import cosine_pitfalls.train as T
    torch.set_num_threads(1)
    cfg = T.TrainConfig(**BASE, **RUNS[name])
    r = T._setup(cfg, None, 0, 1, torch.device('cpu'), None)
    rec = T._epoch(r, 0, type('NoBar', (), dict(update=lambda self, n: None))())
    losses = dict(step_loss=[float(v).hex() for v in rec['step_loss']],
                  **{k: float(rec[k]).hex() for k in ('loss', 'ssl', 'vrns', 'clop') if k in rec})
    state, h = r.model.state_dict(), hashlib.sha256()
    for k in sorted(state): h.update(k.encode()); h.update(state[k].contiguous().reshape(-1).view(torch.uint8).numpy())
    return losses, dict(sha256=h.hexdigest(), shapes={k: list(v.shape) for k, v in state.items()})


def nt_xent_forms() -> dict:
    "Value and input gradient of each NT-Xent form on fixed float32 views, with and without margins' tricks."
    from cosine_pitfalls import losses as L, mechanisms as M
    g = torch.Generator().manual_seed(0)
    base = [torch.randn(6, 5, generator=g) for _ in range(2)]
    specs = dict(plain=None, alg2=M.GradScale(m1=0.1, m2=0.1), alg3=M.GradScale(pos_scale=2.0, curvature=1.0),
                 alg4=M.GradScale(ratio_m1=0.2), alg5=M.GradScale(attenuation='I', alpha=0.5))
    forms = dict(info_nce=lambda a, b, s, t: L.info_nce(a, b, 0.5),
                 info_nce_dcl=lambda a, b, s, t: L.info_nce(a, b, 0.5, decoupled=True),
                 two_view=lambda a, b, s, t: L.two_view_contrast(a, b, 0.5, s, t),
                 two_view_dcl=lambda a, b, s, t: L.two_view_contrast(a, b, 0.5, s, t, decoupled=True),
                 nt_xent=lambda a, b, s, t: M.nt_xent(a, b, 0.5, s, t),
                 nt_xent_anchors=lambda a, b, s, t: M.nt_xent_anchors(torch.cat([a, b]),
                                                                      torch.tensor([0, 2, 7, 11]), 0.5, s, t))
    out = {}
    for fname, f in forms.items():
        for sname, spec in specs.items():
            for terms in ('both', 'attraction', 'repulsion'):
                if fname.startswith('info_nce') and (spec is not None or terms != 'both'): continue
                a, b = (v.clone().requires_grad_() for v in base)
                loss = f(a, b, spec, terms)
                loss.sum().backward()
                out[f'{fname}/{sname}/{terms}'] = [float(loss.detach().sum()).hex(),
                                                   [float(x).hex() for x in torch.cat([a.grad, b.grad]).flatten()]]
    return out


def record() -> None:
    "Record the losses and weights of every run, and the NT-Xent forms, under this machine's kind (others kept)."
    from conftest import this_machine
    data = json.loads(LOSSES.read_text()) if LOSSES.exists() else {}
    losses, weights = {}, {}
    for name in RUNS: losses[name], weights[name] = run(name); print(name, losses[name]['step_loss'][-1])
    data[this_machine()] = dict(runs=losses, weights=weights, nt_xent=nt_xent_forms())
    data['_about'] = ("per-step losses (float.hex), final weights (sha256, names and shapes) and NT-Xent forms, by the "
                      "instruction set torch ran under the cpu profile's pins and the CPU's vendor; written by "
                      "`python tests/test_method_losses.py --record`")
    LOSSES.write_text(json.dumps(data, indent=0) + '\n')


@pytest.fixture(scope='module')
def recorded():
    "This machine's record, or None (with the kinds recorded), and the names and shapes of any record."
    from conftest import this_machine
    data = json.loads(LOSSES.read_text())
    kinds = [k for k in data if not k.startswith('_')]
    return data.get(this_machine()), this_machine(), kinds, data[kinds[0]]['weights']


def _no_record(kind, kinds):
    pytest.skip(f"no bits recorded for this kind of machine ({kind}; recorded: {', '.join(kinds)}): names and shapes "
                f"compared only; record with `python tests/test_method_losses.py --record`")


@pytest.mark.parametrize('name', list(RUNS))
def test_losses_and_weights_as_recorded(recorded, name):
    mine, kind, kinds, any_weights = recorded
    losses, weights = run(name)
    shapes = any_weights[name]['shapes']                     # the same on every machine: old checkpoints load
    assert weights['shapes'] == shapes, set(shapes) ^ set(weights['shapes'])
    if mine is None: _no_record(kind, kinds)
    assert losses == mine['runs'][name]
    assert weights['sha256'] == mine['weights'][name]['sha256']


def test_nt_xent_forms_as_recorded(recorded):
    mine, kind, kinds, _ = recorded
    if mine is None: _no_record(kind, kinds)
    assert nt_xent_forms() == mine['nt_xent']


if __name__ == '__main__':
    if '--record' in sys.argv: record()
    else: print(__doc__)
