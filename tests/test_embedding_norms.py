"""Section 5 part 1's exported helpers, from the installed package: issue 18's fixes (collapse on the minimum over
training, EMA momentum scaled to the step budget, the cpu profile that trains only what it can test)."""
import numpy as np
import pytest
import xarray as xr

from cosine_pitfalls.embedding_norms import (PROFILES, UNTESTABLE, decay_exposure, ema_for_steps, judge_collapse,
                                             settings_5a, role_datasets, table1_parts)
from cosine_pitfalls.paper import notebook_ids


def test_collapse_is_judged_on_training_not_the_final_knn():
    "A run marked collapsed at epoch 2 that recovered by the end still collapsed (the old rule read the final kNN)."
    status = xr.DataArray(['collapsed'] * 3, dims='seed')
    std_min = xr.DataArray([1e-5, 1e-6, 2e-5], dims='seed')
    final = xr.DataArray([0.90, 0.92, 0.91], dims='seed')                # recovered far above chance
    v, text = judge_collapse(status, std_min, final, band=0.15, when=xr.DataArray([2, 3, 2], dims='seed'))
    assert v == 'agree' and '3 of them recovered' in text and 'at epoch 2, 3' in text
    v, _ = judge_collapse(xr.DataArray(['ok'] * 3, dims='seed'), std_min + 1, final, band=0.15)
    assert v == 'differ'


def test_ema_momentum_keeps_the_half_life_share():
    assert ema_for_steps(0.996, 19_500, 19_500) == pytest.approx(0.996)
    assert ema_for_steps(0.996, 1_950, 19_500) == pytest.approx(0.96)
    assert ema_for_steps(0.996, 220, 19_500) == 0.9                     # capped
    assert ema_for_steps(0.999, 10**6, 19_500) == 0.999                 # never above the published one
    with pytest.raises(ValueError, match='steps and paper_steps must be ≥ 1'): ema_for_steps(0.99, 0, 100)


def test_settings_scale_the_ema_per_run_and_grid_the_cut_lr():
    kw = dict(wd=5e-4, wds=[0.05, 0.0], epochs=20, epochs_t3=[20], cuts=[1.0], wds_t5=[1e-6], wds_t6=[5e-4],
              cuts_f5=[1.0, 4.0], lrs_f5=[0.03, 0.3], batch_sizes=[32], vrns_weight=1.0, pairs_kept=8,
              eval_every=2, batch_size=128, ema_paper_steps=19_500, n_train={'digits': 1437})
    S, M = settings_5a(['pitfalls.table1', 'pitfalls.fig5'], role_datasets('digits'), **kw)
    byol = M[(M.model == 'byol')]
    assert (byol.steps == 220).all() and (byol.ema == 0.9).all()
    assert all(S[n]['ema'] == 0.9 for n in byol.index)
    assert all('ema' not in S[n] for n in M.index[M.model != 'byol'])
    f5 = M[M.group == 'fig5']
    assert sorted(set(f5.lr)) == [0.03, 0.3] and len(f5) == 2 * 2 * 2       # methods x c x lr
    assert {S[n]['lr'] for n in f5.index} == {0.03, 0.3}


def test_cpu_profile_names_what_it_cannot_test():
    cpu = PROFILES['cpu']
    untested = cpu['untested'].split(',')
    assert set(untested) <= set(UNTESTABLE) and set(untested) <= set(notebook_ids('05a_embedding_norms.ipynb'))
    assert 'pitfalls.fig3' not in untested and 'lee.table_var' not in untested
    # the λ the cpu profile keeps for Table 1 can act within its steps: consecutive exposures ≥ 0.5 apart
    steps, lrp = cpu['epochs'] * (1437 // cpu['batch_size']), 0.3 * cpu['batch_size'] / 256
    xs = sorted(decay_exposure(float(l), steps, lrp) for l in cpu['wds'].split(','))
    assert all(b - a >= 0.5 for a, b in zip(xs, xs[1:])), xs


def test_simsiam_norm_parts_are_never_judged_on_the_pinned_norm():
    co = dict(wd=[0.05, 0.0], epoch=[0, 1])
    t = xr.Dataset(dict(final_knn_top1=(('wd', 'seed'), [[0.1] * 3, [0.9] * 3]),
                        status=(('wd', 'seed'), [['collapsed'] * 3, ['ok'] * 3]),
                        z_normalized_std=(('wd', 'seed', 'epoch'), np.full((2, 3, 2), 0.1)),
                        z_norm_mean=(('wd', 'seed', 'epoch'), np.full((2, 3, 2), 8.0))), coords=co)
    parts, notes = table1_parts(t, 'simsiam', 0.15, {0.05: 8.0, 0.0: 0.0}, norm=None)
    assert len(parts) == 1 and any('pinned' in n for n in notes)
