"""Section 4's judging functions on simulated results with no true effect (issue 25).

Every verdict of `cosine_pitfalls.repro.directclr` goes through the one gate, so on null results a claim may say
`differ` no more often than its nominal level (tests/nullcheck.py). The shapes are the real `cpu` runs': 4 seeds; the settings the cpu profile
trains (none, mlp2, directclr), and cpu-long's every setting where a claim has parts cpu cannot test; probe
accuracies as binomial draws on the 1,797 digits the cross-validated probe predicts (a seed's level shared by its
settings: the runs of one seed share data order and initialization); covariance spectra of r and of the
embedding (32-d each) drawn alike for every setting (Fig. 2 has one setting: there, an embedding that does not
collapse). Each accuracy judge runs with the raw pixels' headroom (0.965, as on the digits) and without one,
where the paper's effects are testable and a `differ` can happen. 1,000 draws each; prints false differ / agree.
"""
import numpy as np
import pytest
import xarray as xr

from cosine_pitfalls.repro.verdicts import null_rates
from nullcheck import check_blind, check_null
from cosine_pitfalls.repro.directclr import (COLLAPSE, judge_fig12, judge_fig2, judge_fig9, judge_subvector,
                                       judge_table1, judge_table2)

N_IMAGES, SEEDS, DRAWS, LEVEL = 1797, 4, 1000, 0.05   # all labelled digits (5-fold CV probe), cpu's seeds
RES, RAW = 1 / N_IMAGES, 0.965                         # one image; the raw pixels' probe accuracy on the digits
CPU = ('none', 'mlp2', 'directclr')                    # the settings the cpu profile trains
ALL = ('none', 'orthogonal', 'linear', 'diagonal', 'lowrank', 'directclr', 'mlp2', 'random_subset')


def accuracies(rng, names, dim: str = 'setting') -> xr.DataArray:
    "(setting, seed) accuracies, no setting effect: a level per draw, a shift per seed, binomial images."
    p = rng.uniform(0.90, 0.98) + rng.normal(0, 0.005, SEEDS)                  # (seed,) shared by the settings
    hits = rng.binomial(N_IMAGES, np.clip(p, 0, 1), (len(names), SEEDS))       # (setting, seed)
    return xr.DataArray(hits / N_IMAGES, dims=(dim, 'seed'), coords={dim: list(names)})


def spectra(rng, names, decades=(1.0, 5.0), d: int = 32) -> np.ndarray:
    "(setting, seed, d) descending covariance eigenvalues, alike for every setting: log-linear decay, noise."
    slope = rng.uniform(*decades)                       # decades from the largest to the smallest, per draw
    logs = -slope * np.linspace(0, 1, d) + rng.normal(0, 0.3, (len(names), SEEDS, d))
    return -np.sort(-(10.0 ** logs), -1)


def table1(names, baseline):
    return lambda rng: judge_table1(xr.Dataset(dict(probe=accuracies(rng, names))), RES, baseline)


def table2(names, baseline):
    def judge(rng):
        ds = xr.Dataset(dict(probe=accuracies(rng, [n for n in names if n != 'mlp2'])))
        if 'diagonal' in names:          # a trained diagonal projector that counts as one (spread >= 2)
            ds['diagonal_spread'] = xr.DataArray(rng.uniform(2.0, 6.0, SEEDS), dims='seed')
        return judge_table2(ds, RES, baseline)
    return judge


def subvector(rows, baseline):
    return lambda rng: judge_subvector(xr.Dataset(dict(probe=accuracies(rng, rows))), RES, baseline)


def fig12(d0s, baseline):
    def judge(rng):
        return judge_fig12(xr.Dataset(dict(probe=accuracies(rng, d0s, 'd0'))), 6, 32, RES, baseline)
    return judge


def fig9(rng):
    return judge_fig9(xr.Dataset(dict(r_spectrum=(('setting', 'seed', 'r_component'), spectra(rng, CPU))),
                                 coords=dict(setting=list(CPU))))


def fig2(paper_scale):
    "Fig. 2 has one setting: its null is an embedding that does not collapse, ending near the line."
    def judge(rng):
        z = spectra(rng, ['mlp2'], decades=(1.0, 2.7))[0]          # (seed, d): the smallest near 10^-2.7
        return judge_fig2(xr.Dataset(dict(z_spectrum=(('seed', 'z_component'), z))), paper_scale)
    return judge


CLAIMS = {
    'table1 (cpu)': table1(CPU, RAW), 'table1 (cpu-long, no baseline)': table1(ALL, None),
    'table2 (cpu)': table2(CPU, RAW), 'table2 (cpu-long, no baseline)': table2(ALL, None),
    'subvector (cpu)': subvector(['whole r', 'r[:d₀]'], RAW),
    'subvector (cpu-long, no baseline)': subvector(['whole r', 'r[:d₀]', 'random subset'], None),
    'fig12 (cpu, headroom 0.035)': fig12((6, 32), RAW),
    'fig12 (cpu-long, no baseline)': fig12((2, 6, 32), None),
    'fig9 (cpu)': fig9, 'fig2 (cpu scale)': fig2(False), 'fig2 (at the paper scale)': fig2(True),
}


BLIND = {   # claims that cannot say differ in these shapes, and why: their tests assert exactly that
    'fig12 (cpu, headroom 0.035)': "the raw pixels' headroom (0.035) is below the paper's effect (0.112)",
    'table1 (cpu)': "its one deciding part needs the linear projector, which cpu does not train (the rest: shown)",
    'table2 (cpu)': "the raw pixels' headroom (0.035) is below the paper's effect; the other projectors not trained",
    'fig9 (cpu)': "the paper gives no effect in these parts' unit (a figure without a number)",
    'fig2 (cpu scale)': "the paper gives no effect in these parts' unit (a figure without a number)",
    'fig2 (at the paper scale)': "the paper gives no effect in these parts' unit (a figure without a number)"}


@pytest.mark.parametrize('claim', list(CLAIMS))
def test_null_false_differ(claim):
    r = null_rates(CLAIMS[claim], draws=DRAWS, seed=25)
    if claim in BLIND: check_blind(claim, r, BLIND[claim])
    else: check_null(claim, r, DRAWS)


def test_null_spectra_collapse_sometimes():
    "The simulated spectra put dimensions on both sides of the collapse line, so the count paths are exercised."
    s = spectra(np.random.default_rng(0), CPU)
    counts = (s < COLLAPSE * s[..., :1]).sum(-1)
    assert s.shape == (3, SEEDS, 32) and counts.max() > 0


def test_a_path_around_the_gate_fails():
    "A judge that decides 'differ' when no seed shows the effect (the former judge_seeds) fails this test."
    from cosine_pitfalls.repro.verdicts import Check, judge_all

    def by_seeds(rng):
        acc = accuracies(rng, CPU)
        ok = (acc.sel(setting='mlp2') > acc.sel(setting='none')).values
        return judge_all([Check.flag('every seed', ok.all()) if ok.any() else Check.flag('no seed', False)])
    assert null_rates(by_seeds, draws=DRAWS, seed=25)['differ'] > LEVEL
