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


def _worker(rank: int, world: int, port: int, cases: dict, q) -> None:
    "Every case in one process group (a pair of processes costs two interpreter starts): rank 0 sends each result."
    os.environ.update(MASTER_ADDR='127.0.0.1', MASTER_PORT=str(port))
    dist.init_process_group('gloo', rank=rank, world_size=world)
    try:
        torch.set_num_threads(1)
        for name, kw in cases.items():
            net = nn.parallel.DistributedDataParallel(_model(kw))
            n = 16 // world
            views = [v[rank * n:(rank + 1) * n] for v in _batch()]
            out = net(views)
            out.loss.backward()
            loss = out.loss.detach().clone(); dist.all_reduce(loss); loss /= world
            # plain lists, not tensors: a tensor in the queue is rebuilt through the child's fd-sharing listener,
            # which is gone once the child exits (a race: FileNotFoundError in the parent's q.get)
            if rank == 0:
                q.put((name, float(loss),
                       {k: p.grad.tolist() for k, p in net.module.named_parameters() if p.grad is not None}))
    finally:
        dist.destroy_process_group()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0)); return s.getsockname()[1]


@pytest.fixture(scope='module')
def two_processes():
    "Loss and gradients of every case from two gloo processes, each holding half of the batch."
    ctx = mp.get_context('spawn'); q = ctx.Queue()
    port = _free_port()
    procs = [ctx.Process(target=_worker, args=(r, 2, port, CASES, q)) for r in range(2)]
    for p in procs: p.start()
    got = {}
    for _ in CASES:
        name, loss, grads = q.get(timeout=120); got[name] = (loss, grads)
    for p in procs: p.join(timeout=60); assert p.exitcode == 0
    return got


@pytest.mark.parametrize('name', list(CASES))
def test_two_processes_equal_one(two_processes, name):
    kw = CASES[name]
    ref = _model(kw)
    ref_out = ref(_batch()); ref_out.loss.backward()
    loss, grads = two_processes[name]
    ref_loss = float(ref_out.loss.detach())
    assert abs(loss - ref_loss) < 1e-9, (loss, ref_loss)
    for k, p in ref.named_parameters():
        if p.grad is None: continue
        assert torch.allclose(torch.tensor(grads[k], dtype=p.grad.dtype), p.grad, atol=1e-10, rtol=1e-8), k


# --- the engine under DDP (issue 20, point 8): the preflight's DDP part, two gloo processes through train() ---
from cosine_pitfalls.data import load_dataset
from cosine_pitfalls.train import TrainConfig

DDP_RUNS = {
    'moco_v2': dict(method='moco_v2', queue_size=128),
    'simclr+margins+vrns': dict(method='simclr', m1=0.2, vrns_weight=3.0),
    'supcon+clop': dict(method='supcon', clop_weight=1.0),
}


@pytest.mark.parametrize('name', list(DDP_RUNS))
def test_train_in_two_gloo_processes(name, tmp_path):
    "Both processes exit 0 and leave the group; process 0 alone evaluates (kNN, probe)."
    from cosine_pitfalls.repro.preflight import ddp_check
    cfg = TrainConfig(dataset='digits', width=8, head_width=32, head_out=16, batch_size=16, epochs=2,
                      steps_per_epoch=2, eval_every=1, diag_samples=32, knn_k=10, linear_probe=True, probe_epochs=2,
                      out_dir=str(tmp_path/'run'), **DDP_RUNS[name])
    d = load_dataset('digits')
    small = type(d)(d.name, d.train_x[:200], d.train_y[:200], d.test_x[:50], d.test_y[:50], d.num_classes, d.mean,
                    d.std, d.source)
    assert ddp_check(cfg, small) == []
    assert (tmp_path/'run'/'run.nc').exists() and (tmp_path/'run'/'rng.rank1.pt').exists()


def test_queue_is_not_a_broadcast_buffer(monkeypatch):
    "DDP leaves out the buffers every process updates alike (MoCo's queue, DINO's centre, CLOP's prototypes)."
    from cosine_pitfalls.train import _ddp, build_model
    # in this process: its group's address is undone after the test (left set, it reached a later test's job)
    monkeypatch.setenv('MASTER_ADDR', '127.0.0.1'); monkeypatch.setenv('MASTER_PORT', str(_free_port()))
    dist.init_process_group('gloo', rank=0, world_size=1)
    try:
        cfg = TrainConfig(method='moco_v2', width=8, head_width=16, head_out=8, queue_size=64, batch_size=16,
                          clop_weight=1.0)
        net = _ddp(build_model(cfg, 8, 100, 1), cfg, torch.device('cpu'))
        ignored = set(net.module._ddp_params_and_buffers_to_ignore)      # full names, e.g. objective.bank.queue
        assert {'queue', 'queue_ptr', 'prototypes'} <= {n.split('.')[-1] for n in ignored}, ignored
        assert not any('running_mean' in n for n in ignored), ignored
    finally:
        dist.destroy_process_group()
