"""The collapse monitor's metrics against independent numpy implementations of their papers' formulas on fixed
data, and against the one published reference value we found for each convention (issue 28).

- RankMe (Garrido et al. 2023, Eq. 1): singular values of the raw embeddings, p = σ/‖σ‖₁ + 1e-7.
- The centred effective rank (Roy & Vetterli 2007 on the centred embeddings).
- LiDAR (Thilak et al. 2023): the LDA matrix Σ_w^{-1/2} Σ_b Σ_w^{-1/2}, samples as classes, q views each.
- α-ReQ (Agrawal et al. 2022): the weighted power-law fit of the covariance spectrum, ranks 11..100.
- Uniformity (Wang & Isola 2020, Eq. 5) over every pair of the monitor's window, whatever the batch size.

Published values: the α-ReQ authors' library reptrix tests, on `torch.manual_seed(0); torch.randn(1000, 1024)`,
`alpha.get_alpha` = 0.148936 (its `fit_range` np.arange(10, 100): ranks 11..100, weights 1/k) and
`rankme.get_rankme` = 613.4726. reptrix's "RankMe" is NOT Garrido et al.'s: it takes the eigenvalues of the
centred covariance (σ², centred) where the paper takes the singular values σ of the raw matrix. We reproduce
its number with its convention, to show the estimator is the same, and show that the paper's RankMe of the
same matrix is another number (814.36): a RankMe value means nothing without its convention.
"""
import math

import numpy as np
import pytest
import torch

from cosine_pitfalls.diagnostics import (CollapseMonitor, _entropy_rank, alpha_req, lidar, pair_stats, rankme,
                                         spectrum_stats)
from cosine_pitfalls.evaluation import covariance_spectrum, effective_rank

RNG = np.random.default_rng(28)


# ---- the papers' formulas, written independently with numpy ------------------------------------------------
def np_entropy_rank(lam, eps):
    "exp(−Σ p log p), p = λ/‖λ‖₁ + ε (RankMe Eq. 1, LiDAR); eps = 0: Roy & Vetterli, 0 log 0 = 0."
    lam = np.clip(np.asarray(lam, dtype=np.float64), 0, None)
    p = lam / lam.sum() + eps
    p = p[p > 0]
    return float(np.exp(-(p * np.log(p)).sum()))


def np_rankme(z, eps=1e-7):
    return np_entropy_rank(np.linalg.svd(z, compute_uv=False), eps)


def np_erank_centered(z):
    return np_entropy_rank(np.linalg.svd(z - z.mean(0), compute_uv=False), 0.0)


def np_lidar(x, delta=1e-4, eps=1e-7):
    "Thilak et al.: x (n, q, d); Σ_b over the class means / (n − 1), Σ_w over the members / (n (q − 1)) + δI."
    n, q, d = x.shape
    mu_i = x.mean(1); mu = mu_i.mean(0)
    sb = np.zeros((d, d)); sw = np.zeros((d, d))
    for i in range(n):
        sb += np.outer(mu_i[i] - mu, mu_i[i] - mu)
        for j in range(q): sw += np.outer(x[i, j] - mu_i[i], x[i, j] - mu_i[i])
    sb /= n - 1; sw = sw / (n * (q - 1)) + delta * np.eye(d)
    w, v = np.linalg.eigh(sw)
    isq = v @ np.diag(w ** -0.5) @ v.T
    return np_entropy_rank(np.linalg.eigvalsh(isq @ sb @ isq), eps)


def np_alpha(z, lo=11, hi=100):
    "α of λ_k ∝ k^−α: numpy's polyfit of log λ_k on log k, squared residuals weighted 1/k (polyfit's w²)."
    lam = np.sort(np.linalg.eigvalsh(np.cov(z, rowvar=False)))[::-1]
    hi = min(hi, z.shape[0] - 1, z.shape[1])
    k = np.arange(lo, hi + 1)
    return -np.polyfit(np.log(k), np.log(lam[k - 1]), 1, w=np.sqrt(1.0 / k))[0]


def np_uniform(z1, z2, t=2.0):
    "log of the mean of exp(−t‖ẑ_i − ẑ_j‖²) over the pairs i < j within each view, both views' pairs pooled."
    vals = []
    for z in (z1, z2):
        zn = z / np.linalg.norm(z, axis=1, keepdims=True)
        i, j = np.triu_indices(len(zn), 1)
        vals.append(np.exp(-t * ((zn[i] - zn[j]) ** 2).sum(1)))
    return float(np.log(np.concatenate(vals).mean()))


def cloud(n, d, decay=0.9, offset=0.0):
    "n embeddings in d dims with a power-law spectrum, shifted away from the origin by `offset`."
    return RNG.standard_normal((n, d)) * np.arange(1, d + 1) ** (-decay / 2) + offset


# ---- each metric against its formula ---------------------------------------------------------------------------
@pytest.mark.parametrize('n,d,offset', [(64, 16, 0.0), (300, 40, 3.0), (20, 50, 1.0)])
def test_rankme_and_centred_rank_against_numpy(n, d, offset):
    z = cloud(n, d, offset=offset)
    t = torch.from_numpy(z)
    assert float(rankme(t)) == pytest.approx(np_rankme(z), rel=1e-12)
    assert float(effective_rank(t, center=True)) == pytest.approx(np_erank_centered(z), rel=1e-10)
    st = spectrum_stats(t)
    assert float(st['z_rankme']) == pytest.approx(np_rankme(z), rel=1e-12)
    assert float(st['z_erank_centered']) == pytest.approx(np_erank_centered(z), rel=1e-10)
    cov = np.sort(np.clip(np.linalg.eigvalsh(np.cov(z, rowvar=False)), 0, None))[::-1][:min(n, d)]
    np.testing.assert_allclose(st['z_spectrum'].numpy(), cov, rtol=1e-9, atol=1e-12)   # σ²/(n − 1)


@pytest.mark.parametrize('n,q,d', [(40, 2, 8), (25, 5, 6), (10, 2, 16), (6, 2, 40)])   # n q < d: the span
def test_lidar_against_numpy(n, q, d):
    x = RNG.standard_normal((n, 1, d)) * 2 + RNG.standard_normal((n, q, d)) * np.linspace(1, 0.1, d)
    assert float(lidar(torch.from_numpy(x))) == pytest.approx(np_lidar(x), rel=1e-9)
    assert float(lidar(torch.from_numpy(x), delta=1e-2)) == pytest.approx(np_lidar(x, delta=1e-2), rel=1e-9)
    rot, _ = np.linalg.qr(RNG.standard_normal((d, d)))               # LDA is rotation invariant
    assert float(lidar(torch.from_numpy(x @ rot))) == pytest.approx(np_lidar(x), rel=1e-7)


@pytest.mark.parametrize('n,d,decay', [(400, 120, 0.9), (200, 64, 1.6), (150, 30, 0.5)])
def test_alpha_req_against_numpy(n, d, decay):
    z = cloud(n, d, decay)
    assert float(alpha_req(torch.from_numpy(z))) == pytest.approx(np_alpha(z), rel=1e-10)


def test_uniformity_is_pooled_over_the_window_whatever_the_batch_size():
    z1, z2 = cloud(96, 12), cloud(96, 12)
    want = np_uniform(z1, z2)
    for batch in (8, 16, 48, 96):
        mon = CollapseMonitor(buffer_size=192)
        for i in range(0, 96, batch): mon.update(torch.from_numpy(z1[i:i + batch]), torch.from_numpy(z2[i:i + batch]))
        assert mon.compute()['uniform'] == pytest.approx(want, rel=1e-12), batch
    # the window: the last buffer_size / 2 pairs
    mon = CollapseMonitor(buffer_size=64)
    for i in range(0, 96, 16): mon.update(torch.from_numpy(z1[i:i + 16]), torch.from_numpy(z2[i:i + 16]))
    assert mon.compute()['uniform'] == pytest.approx(np_uniform(z1[-32:], z2[-32:]), rel=1e-12)


def test_the_monitor_reads_every_window_metric_as_its_formula():
    z1 = cloud(120, 20, offset=1.0); z2 = z1 + 0.3 * RNG.standard_normal(z1.shape); r = cloud(240, 24)
    mon = CollapseMonitor(buffer_size=160)                            # the window: the last 80 pairs
    for i in range(0, 120, 24):
        mon.update(*(torch.from_numpy(a[i:i + 24]) for a in (z1, z2)), torch.from_numpy(r[2 * i:2 * i + 48]))
    got = mon.compute()
    w1, w2, wz, wr = z1[-80:], z2[-80:], np.concatenate([z1[-80:], z2[-80:]]), r[-160:]
    assert got['z_rankme'] == pytest.approx(np_rankme(wz), rel=1e-10)
    assert got['z_erank_centered'] == pytest.approx(np_erank_centered(wz), rel=1e-10)
    assert got['z_erank'] == got['z_erank_centered']                 # the deprecated name, the same number
    assert got['z_lidar'] == pytest.approx(np_lidar(np.stack([w1, w2], 1)), rel=1e-8)
    assert got['z_alpha_req'] == pytest.approx(np_alpha(wz), rel=1e-10)
    assert got['uniform'] == pytest.approx(np_uniform(w1, w2), rel=1e-12)
    assert got['r_rankme'] == pytest.approx(np_rankme(wr), rel=1e-10)
    assert got['r_alpha_req'] == pytest.approx(np_alpha(wr), rel=1e-10)
    ds = mon.to_dataset()
    cov = np.sort(np.linalg.eigvalsh(np.cov(wz, rowvar=False)))[::-1]
    np.testing.assert_allclose(ds.z_spectrum.values, cov, rtol=1e-9, atol=1e-12)
    assert 'σₖ²/(n − 1)' in ds.z_spectrum.attrs['description']


# ---- published values ------------------------------------------------------------------------------------------
@pytest.fixture(scope='module')
def reptrix_matrix():
    torch.manual_seed(0)
    return torch.randn(1000, 1024).double()   # reptrix's tests/test_alpha.py and tests/test_rankme.py


def test_alpha_req_reproduces_the_authors_published_value(reptrix_matrix):
    "reptrix (Agrawal, Ghosh, Mondal): get_alpha(randn(1000, 1024)) = 0.148936, ranks 11..100, weights 1/k."
    assert float(alpha_req(reptrix_matrix)) == pytest.approx(0.148936, abs=1e-6)


def test_rankme_conventions_on_the_published_matrix(reptrix_matrix):
    "reptrix's 613.4726 is the RankMe estimator on covariance eigenvalues; the paper's RankMe is 814.36."
    cov_variant = float(_entropy_rank(covariance_spectrum(reptrix_matrix), 1e-7))
    assert cov_variant == pytest.approx(613.4726, abs=1e-3)          # reptrix's convention, its number
    paper = float(rankme(reptrix_matrix))                             # Garrido et al.'s: raw singular values
    assert paper == pytest.approx(814.36, abs=0.01) and abs(paper - cov_variant) > 150


def test_the_names_say_which_rank():
    "A cloud away from the origin: RankMe (raw) and the centred effective rank are different numbers."
    z = torch.from_numpy(cloud(256, 32, decay=0.5, offset=2.0))
    st = spectrum_stats(z)
    assert float(st['z_rankme']) == pytest.approx(float(effective_rank(z)), abs=1e-3)    # uncentred, + ε
    assert float(st['z_erank_centered']) == pytest.approx(float(effective_rank(z, center=True)), rel=1e-10)
    assert float(st['z_erank_centered']) > 1.5 * float(st['z_rankme'])
