"""Parity with the peer library lightly (an external oracle, a dev dependency): each of our objectives against
lightly's counterpart on random float64 inputs, value AND input-gradient within 1e-10, after the convention
factor stated in the loss's docstring (nbs/library/10_losses.ipynb, "Conventions"); and the similarity-weighted kNN.

lightly is a dev requirement (settings.ini), so it is imported plainly: a missing lightly fails this module
rather than skipping it. Never loosen a tolerance here to make a test pass: if we and lightly differ, find out
who follows the paper and write it down in the notebook.
"""
import pytest
import torch
import torch.nn.functional as F

import lightly
from lightly.loss import (BarlowTwinsLoss, DCLLoss, DINOLoss as LightlyDINO, DirectCLRLoss as LightlyDirectCLR,
                          NegativeCosineSimilarity, NTXentLoss, VICRegLoss)
from lightly.utils.benchmarking import knn_predict as lightly_knn_predict

from cosine_pitfalls import losses as L
from cosine_pitfalls.evaluation import knn_scores, knn_topk

TOL = 1e-10
f64 = torch.float64


def views(n=16, d=12, seed=0, scale=1.0):
    "Two float64 views (n, d) that require gradients."
    g = torch.Generator().manual_seed(seed)
    return [(scale * torch.randn(n, d, generator=g, dtype=f64)).requires_grad_() for _ in range(2)]


def value_and_grads(loss_fn, *xs):
    "The loss and its gradient with respect to every input."
    out = loss_fn(*xs)
    return out.detach(), torch.autograd.grad(out, xs)


def assert_parity(ours, theirs, xs, factor=1.0, offset=0.0):
    "ours(xs) == factor · theirs(xs) + offset in value, factor · gradient, to TOL (absolute and relative)."
    v1, g1 = value_and_grads(ours, *xs)
    v2, g2 = value_and_grads(theirs, *xs)
    assert v1.dtype == f64 and v2.dtype == f64
    torch.testing.assert_close(v1, factor * v2 + offset, atol=TOL, rtol=TOL)
    for a, b in zip(g1, g2):
        torch.testing.assert_close(a, factor * b, atol=TOL, rtol=TOL)


def test_lightly_version():
    "The pinned oracle: conventions below were read from this version."
    assert lightly.__version__.startswith('1.6')


@pytest.mark.parametrize('tau', [0.5, 0.1, 1.0])
def test_infonce_ntxent(tau):
    "SimCLR's NT-Xent: same convention (mean over the 2n anchors, cos/τ)."
    assert_parity(L.InfoNCE(tau), NTXentLoss(temperature=tau), views(seed=1))


def test_infonce_batched_functional():
    "The batched functional form, one problem per leading index."
    z0, z1 = views(n=10, d=6, seed=2)
    ours = lambda a, b: L.info_nce(torch.stack([a, a.flip(0)]), torch.stack([b, b.flip(0)]), 0.3).sum()
    theirs = lambda a, b: NTXentLoss(0.3)(a, b) + NTXentLoss(0.3)(a.flip(0), b.flip(0))
    assert_parity(ours, theirs, [z0, z1])


def test_margin_infonce_without_margin_is_ntxent():
    "MarginInfoNCE with every margin 0 is InfoNCE; Alg. 3's scaling keeps the value (margins App. E)."
    z = views(seed=3)
    assert_parity(L.MarginInfoNCE(0.2), NTXentLoss(0.2), z)
    v, _ = value_and_grads(L.MarginInfoNCE(0.2, pos_scale=3.0), *z)
    torch.testing.assert_close(v, NTXentLoss(0.2)(*z).detach(), atol=TOL, rtol=TOL)


@pytest.mark.parametrize('tau', [0.1, 0.5])
def test_dcl(tau):
    "DCL: lightly averages its two one-directional losses, each a mean over n: the mean over our 2n anchors."
    assert_parity(L.DCL(tau), DCLLoss(temperature=tau), views(seed=4))
    assert L.DCL().temperature == DCLLoss().temperature == 0.1


def test_supcon_unique_labels_is_ntxent():
    "SupCon (lightly 1.6 has none): with every sample its own class, or unlabelled, it is NT-Xent."
    z = views(seed=5)
    assert_parity(lambda a, b: L.SupCon(0.2)(a, b, torch.arange(16)), NTXentLoss(0.2), z)
    assert_parity(lambda a, b: L.SupCon(0.2)(a, b), NTXentLoss(0.2), z)


def test_moco_queue():
    "MoCo with a queue = lightly's NTXentLoss with a memory bank; the same keys enter the queue, over two steps."
    K, d, n = 40, 12, 16
    ours = L.MoCoLoss(0.2, queue_size=K, dim=d, generator=torch.Generator().manual_seed(0)).double()
    theirs = NTXentLoss(0.2, memory_bank_size=(K, d))
    theirs.memory_bank.bank = ours.bank.queue.clone()                  # the same initial negatives
    for step in range(2):
        q, k = views(n, d, seed=10 + step)
        v1, g1 = value_and_grads(ours, q, k)
        v2, g2 = value_and_grads(theirs, q, k)
        torch.testing.assert_close(v1, v2, atol=TOL, rtol=TOL)
        for a, b in zip(g1, g2): torch.testing.assert_close(a, b, atol=TOL, rtol=TOL)
        torch.testing.assert_close(ours.bank.queue, theirs.memory_bank.bank, atol=TOL, rtol=TOL)
        assert int(ours.bank.queue_ptr) == int(theirs.memory_bank.bank_ptr) == (step + 1) * n


def test_negative_cosine_simsiam():
    "SimSiam: ½D(p1, z2) + ½D(p2, z1) with D = −cos, lightly's NegativeCosineSimilarity per direction."
    p0, p1, z0, z1 = views(seed=6) + views(seed=7)
    crit = NegativeCosineSimilarity()
    assert_parity(lambda a, b, c, e: L.NegativeCosine()([a, b], [e, c]),
                  lambda a, b, c, e: 0.5 * (crit(a, e) + crit(b, c)), [p0, p1, z0, z1])
    assert_parity(L.NegativeCosine(), crit, [p0, z1])                  # one pair: the same call


def test_byol_sum_of_directions():
    "BYOL sums 2 − 2cos over the two directions (paper Eq. 2): 4 + 2·(lightly's NegativeCosine sum)."
    p0, p1, z0, z1 = views(seed=8) + views(seed=9)
    crit = NegativeCosineSimilarity()
    assert_parity(lambda a, b, c, e: L.BYOLLoss()([a, b], [e, c]),
                  lambda a, b, c, e: crit(a, e) + crit(b, c), [p0, p1, z0, z1], factor=2.0, offset=4.0)
    # the companion's convention (methods: BYOLLoss('mean')) is half of it
    assert_parity(lambda a, b, c, e: L.BYOLLoss('mean')([a, b], [e, c]),
                  lambda a, b, c, e: crit(a, e) + crit(b, c), [p0, p1, z0, z1], factor=1.0, offset=2.0)


def test_dino_with_centre():
    "DINO over two steps, the centre moving between them. lightly divides by torch.tensor(τ_t), a float32: we pass"
    "that float32 value as our τ_t (the one convention factor)."
    K = 20
    tt = float(torch.tensor(0.04))                                     # 0.03999999910593033
    ours = L.DINOLoss(K, student_temp=0.1, teacher_temp=tt, center_momentum=0.9).double()
    theirs = LightlyDINO(K, warmup_teacher_temp=0.04, teacher_temp=0.04, student_temp=0.1,
                         center_momentum=0.9).double()
    for step in range(2):
        s0, s1 = views(8, K, seed=20 + step, scale=3.0)
        t0, t1 = (x.detach() for x in views(8, K, seed=30 + step, scale=3.0))
        v1, g1 = value_and_grads(lambda a, b: ours([a, b], [t0, t1]), s0, s1)
        v2, g2 = value_and_grads(lambda a, b: theirs([t0, t1], [a, b]), s0, s1)
        torch.testing.assert_close(v1, v2, atol=TOL, rtol=TOL)
        for a, b in zip(g1, g2): torch.testing.assert_close(a, b, atol=TOL, rtol=TOL)
        torch.testing.assert_close(ours.center, theirs.center.reshape(-1), atol=TOL, rtol=TOL)
    assert ours.center.abs().max() > 0.01                               # the centre did move


@pytest.mark.parametrize('lambd', [5e-3, 0.0051])
def test_barlow_twins(lambd):
    "Barlow Twins: batch-standardized views (biased variance, eps 1e-5), cross-correlation / n."
    assert_parity(L.BarlowTwins(lambd), BarlowTwinsLoss(lambda_param=lambd), views(32, 8, seed=11))
    assert L.BarlowTwins().lambd == BarlowTwinsLoss().lambda_param == 5e-3


def test_vicreg():
    "VICReg: 25 / 25 / 1, variance halved over the two views, covariance summed, / d."
    assert_parity(L.VICReg(), VICRegLoss(), views(32, 8, seed=12))
    assert_parity(L.VICReg(10.0, 5.0, 2.0), VICRegLoss(10.0, 5.0, 2.0), views(32, 8, seed=13))


def test_directclr():
    "DirectCLR: NT-Xent on r[:, :d0]."
    assert_parity(L.DirectCLRLoss(5, 0.3), LightlyDirectCLR(loss_dim=5, temperature=0.3), views(16, 12, seed=14))


def test_wrapped_lightly_base():
    "A lightly loss wrapped by our CLOP term: the base is called without labels, the term added."
    z0, z1 = views(seed=15)
    y = torch.arange(16) % 4
    clop = L.CLOP(4, 12).double()
    ours = L.WithCLOP(NTXentLoss(0.5), clop)
    assert_parity(lambda a, b: ours(a, b, y),
                  lambda a, b: NTXentLoss(0.5)(a, b) + clop(torch.cat([a, b]), torch.cat([y, y])), [z0, z1])
    assert_parity(lambda a, b: ours(a, b), NTXentLoss(0.5), [z0, z1])   # labels None: pure SSL


def test_weighted_knn():
    "The similarity-weighted kNN (Wu et al. 2018; k = 200, T = 0.1): our class votes rank the classes exactly as"
    "lightly's knn_predict (which returns only that ranking), and the top-1 / top-5 accuracies agree."
    g = torch.Generator().manual_seed(16)
    C, n, m, d = 10, 500, 64, 16
    bank = F.normalize(torch.randn(n, d, generator=g, dtype=f64), dim=-1)
    ybank = torch.randint(0, C, (n,), generator=g)
    test = F.normalize(torch.randn(m, d, generator=g, dtype=f64), dim=-1)
    ytest = torch.randint(0, C, (m,), generator=g)
    theirs = lightly_knn_predict(test, bank.T, ybank, C, knn_k=200, knn_t=0.1)            # (m, C) ranking
    scores = knn_scores(bank, ybank, test, k=200, metric='cosine', weighting='similarity', temperature=0.1,
                        num_classes=C)
    assert torch.equal(scores.argsort(-1, descending=True), theirs)
    acc = knn_topk(bank, ybank, test, ytest, k=200, temperature=0.1, ks=(1, 5))
    for k in (1, 5):
        want = (theirs[:, :k] == ytest[:, None]).any(-1).double().mean()
        torch.testing.assert_close(acc[k].double(), want, atol=TOL, rtol=0)


def test_ours_fp32_under_autocast():
    "Under bf16 autocast our losses compute and return fp32, close to the float64 loss."
    g = torch.Generator().manual_seed(17)
    a, b = torch.randn(32, 16, generator=g), torch.randn(32, 16, generator=g)
    ref = L.InfoNCE(0.1)(a.double(), b.double())
    with torch.autocast('cpu', dtype=torch.bfloat16):
        ours = L.InfoNCE(0.1)(a, b)
    assert ours.dtype == torch.float32
    torch.testing.assert_close(ours.double(), ref, atol=1e-6, rtol=1e-6)
