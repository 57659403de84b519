"""Data-parallel NT-Xent: two gloo processes on CPU, each holding half of a global batch of two views.

Each rank computes `nt_xent(..., gather=True)` (its local anchors against the gathered global batch) and
backpropagates it; DDP averages over the ranks (done here by hand, as DDP's reducer does: importing DDP
pulls in torch._dynamo, seconds per process). Loss and gradients must equal one process computing the loss on
the whole batch. Two common mistakes are run too, to show what they break (see nbs/library/15_mechanisms.ipynb).
"""
import os, socket, warnings
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from cosine_pitfalls.mechanisms import GradScale, nt_xent, nt_xent_anchors

WORLD, N, D, D_IN, TAU, TOL = 2, 8, 5, 6, 0.5, 1e-6     # N samples in the global batch, n = N/WORLD per rank
CASES = {'simclr': (None, 'both'), 'attraction': (None, 'attraction'), 'repulsion': (None, 'repulsion'),
         'margins': (GradScale(m1=0.4, m2=0.2), 'both'),
         'pos_curv': (GradScale(pos_scale=2.0, curvature=0.7), 'both'),
         'ratio': (GradScale(ratio_m1=1.6), 'both'),
         'atten_I': (GradScale(attenuation='I', alpha=1.0), 'both'),
         'atten_II': (GradScale(attenuation='II', alpha=0.25), 'repulsion')}   # (spec, terms)


def _data():
    "The global batch: two views (N, D) of embeddings, inputs (N, D_IN) for the encoder, float64."
    g = torch.Generator().manual_seed(0)
    return [torch.randn(N, k, generator=g, dtype=torch.float64) for k in (D, D, D_IN, D_IN)]


def _encoder() -> torch.nn.Module:
    torch.manual_seed(1)
    return torch.nn.Linear(D_IN, D).double()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def _leaves(*xs):
    return [x.clone().requires_grad_() for x in xs]


def _gather_without_grad(x):
    "The common mistake: all_gather (no autograd), then this rank's slot replaced by the local tensor."
    parts = [torch.empty_like(x) for _ in range(WORLD)]
    dist.all_gather(parts, x.detach())
    parts[dist.get_rank()] = x
    return torch.cat(parts)


def _worker(rank: int, out_dir: str, port: int):
    os.environ.update(MASTER_ADDR='127.0.0.1', MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group('gloo', rank=rank, world_size=WORLD)
    try:
        z1, z2, x1, x2 = _data()
        n = N // WORLD; sl = slice(rank * n, (rank + 1) * n)
        res = {}
        for name, (spec, terms) in CASES.items():
            a, b = _leaves(z1[sl], z2[sl])
            loss = nt_xent(a, b, TAU, spec, terms, gather=True)
            loss.backward()
            mean = loss.detach().clone(); dist.all_reduce(mean); mean /= WORLD   # logged global loss
            res[name] = dict(loss=mean, g1=a.grad / WORLD, g2=b.grad / WORLD)     # / WORLD: DDP's average
        model = _encoder()                                                       # a data-parallel step:
        z = model(torch.cat([x1[sl], x2[sl]]))                                   # (2n, D) local embeddings
        nt_xent(z[:n], z[n:], TAU, gather=True).backward()
        for p in model.parameters():                                             # DDP's reducer: average the
            dist.all_reduce(p.grad); p.grad /= WORLD                             # gradients over the ranks
        res['ddp'] = {k: p.grad.clone() for k, p in model.named_parameters()}
        a, b = _leaves(z1[sl], z2[sl])                            # mistake 1: no gradient through the gather
        rows = torch.arange(n) + rank * n
        zg = torch.cat([_gather_without_grad(a), _gather_without_grad(b)])     # (2N, D)
        nt_xent_anchors(zg, torch.cat([rows, rows + N]), TAU).backward()
        res['no_grad_gather'] = dict(g1=a.grad / WORLD, g2=b.grad / WORLD)
        a, b = _leaves(z1[sl], z2[sl])                            # mistake 2: a plain all_reduce in the loss
        loss = nt_xent(a, b, TAU, gather=True)
        with warnings.catch_warnings():
            warnings.simplefilter('ignore')                                      # torch: no autograd kernel
            dist.all_reduce(loss); loss = loss / WORLD
            loss.backward()
        res['allreduce_loss'] = dict(loss=loss.detach(), g1=a.grad / WORLD, g2=b.grad / WORLD)
        torch.save(res, Path(out_dir) / f'rank{rank}.pt')
    finally:
        dist.destroy_process_group()


@pytest.fixture(scope='module')
def ranks(tmp_path_factory):
    "Run the two processes once; each rank's saved results."
    out = tmp_path_factory.mktemp('gather')
    mp.spawn(_worker, args=(str(out), _free_port()), nprocs=WORLD, join=True)
    return [torch.load(out / f'rank{r}.pt') for r in range(WORLD)]


def _reference(spec=None, terms='both'):
    "One process, the whole batch: loss and its gradients w.r.t. both views, (N, D) each."
    z1, z2, _, _ = _data()
    a, b = _leaves(z1, z2)
    loss = nt_xent(a, b, TAU, spec, terms)
    loss.backward()
    return loss.detach(), a.grad, b.grad


def _slices(t):
    n = N // WORLD
    return [t[r * n:(r + 1) * n] for r in range(WORLD)]


def _close(a, b, tol=TOL):
    return (a - b).abs().max().item() <= tol


@pytest.mark.parametrize('case', list(CASES))
def test_gathered_loss_and_gradients_equal_one_process(ranks, case):
    loss, g1, g2 = _reference(*CASES[case])
    for r, res in enumerate(ranks):
        got = res[case]
        assert _close(got['loss'], loss), (case, r, got['loss'], loss)
        assert _close(got['g1'], _slices(g1)[r]), (case, r)
        assert _close(got['g2'], _slices(g2)[r]), (case, r)


def test_ddp_parameter_gradients_equal_one_process(ranks):
    "An encoder's gradients, averaged over the ranks as DDP does, equal one process's on the global batch."
    z1, z2, x1, x2 = _data()
    model = _encoder()
    z = model(torch.cat([x1, x2]))
    nt_xent(z[:N], z[N:], TAU).backward()
    for res in ranks:
        for k, p in model.named_parameters():
            assert _close(res['ddp'][k], p.grad), k


def test_gather_without_gradient_loses_the_other_ranks_terms(ranks):
    _, g1, _ = _reference()
    errs = [(res['no_grad_gather']['g1'] - _slices(g1)[r]).abs().max().item() for r, res in enumerate(ranks)]
    assert min(errs) > 1e-3, errs


def test_plain_all_reduce_in_the_loss_divides_gradients_by_world(ranks):
    loss, g1, g2 = _reference()
    for r, res in enumerate(ranks):
        got = res['allreduce_loss']
        assert _close(got['loss'], loss)                              # the value looks right ...
        assert _close(got['g1'], _slices(g1)[r] / WORLD)              # ... the gradients are 1/W of the truth
        assert _close(got['g2'], _slices(g2)[r] / WORLD)
        assert not _close(got['g1'], _slices(g1)[r], 1e-3)
