"DDP with the engine's methods: two gloo processes on CPU give the loss and gradients of one process on the global batch."
import os, socket

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn

from cosine_pitfalls.methods import MethodConfig, SSLMethod

CASES = {
    'simclr': dict(method='simclr', projector='linear'),
    'simclr+vrns': dict(method='simclr', projector='linear', vrns_weight=3.0),
    'dcl': dict(method='dcl', projector='linear'),
    'simclr+margins': dict(method='simclr', projector='linear', m1=0.3),
}


def _model(kw: dict) -> SSLMethod:
    "A method on a BN-free backbone (BN statistics would differ between one batch and two half batches)."
    torch.manual_seed(0)
    backbone = nn.Sequential(nn.Flatten(), nn.Linear(64, 12))
    backbone.out_dim = 12
    return SSLMethod(MethodConfig(**kw), backbone, num_classes=10, n_total=1000,
                     generator=torch.Generator().manual_seed(0)).double()


def _batch():
    g = torch.Generator().manual_seed(1)
    return [torch.randn(16, 1, 8, 8, generator=g, dtype=torch.float64) for _ in range(2)]


def _worker(rank: int, world: int, port: int, kw: dict, q) -> None:
    os.environ.update(MASTER_ADDR='127.0.0.1', MASTER_PORT=str(port))
    dist.init_process_group('gloo', rank=rank, world_size=world)
    try:
        torch.set_num_threads(1)
        net = nn.parallel.DistributedDataParallel(_model(kw))
        n = 16 // world
        views = [v[rank * n:(rank + 1) * n] for v in _batch()]
        out = net(views)
        out.loss.backward()
        loss = out.loss.detach().clone(); dist.all_reduce(loss); loss /= world
        if rank == 0: q.put((float(loss), {k: p.grad.clone() for k, p in net.module.named_parameters() if p.grad is not None}))
    finally:
        dist.destroy_process_group()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0)); return s.getsockname()[1]


@pytest.mark.parametrize('name', list(CASES))
def test_two_processes_equal_one(name):
    kw = CASES[name]
    ref = _model(kw)
    ref_out = ref(_batch()); ref_out.loss.backward()
    ctx = mp.get_context('spawn'); q = ctx.Queue()
    port = _free_port()
    procs = [ctx.Process(target=_worker, args=(r, 2, port, kw, q)) for r in range(2)]
    for p in procs: p.start()
    loss, grads = q.get(timeout=120)
    for p in procs: p.join(timeout=60); assert p.exitcode == 0
    ref_loss = float(ref_out.loss.detach())
    assert abs(loss - ref_loss) < 1e-9, (loss, ref_loss)
    for k, p in ref.named_parameters():
        if p.grad is None: continue
        assert torch.allclose(grads[k], p.grad, atol=1e-10, rtol=1e-8), k
