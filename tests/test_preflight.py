"""`reproduce --preflight` at a tiny size: the gpu and paper profiles' runs planned, checked and stepped on the CPU;
a bug re-introduced is a non-zero exit that names the run (issue 20).

Stepping is what costs (the CUDA path on the CPU runs bf16 autocast, which a CPU pinned to AVX2 emulates), so one
test steps each kind of path: the CPU's fp32 path (smoke, section 4: the CLI's wiring, a failing step, nothing kept
alive) and the CUDA path (gpu, section 4: every path, one step each). Where a test checks planning (the paper
profile's ImageNet and Tiny-ImageNet runs, the re-introduced bugs, found before any step), it plans and checks every
run's config and data without stepping (`steps=0`)."""
import pytest

from conftest import run_cli
from cosine_pitfalls.repro import preflight as pf
from cosine_pitfalls.repro import prototypes_margins as pm

TINY = dict(batch_cap=4, side_cap=8, log=lambda s: None)


def test_cli_preflight_of_section_4_smoke(cli):
    # one ID: the CLI's wiring (every path of section 4 is stepped by the next test, in-process)
    r = run_cli('reproduce', '--profile', 'smoke', '--only', 'directclr.fig9', '--preflight', timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    for text in ('runs planned', 'distinct code paths stepped', 'estimated training time on this device',
                 'peak memory of the largest run, estimated', 'resumed from its checkpoint', 'failures: 0'):
        assert text in r.stdout, (text, r.stdout)


def test_gpu_profile_of_section_4_steps_every_path():
    "The gpu profile's section 4 at its own sizes: a 2-layer, a linear-free and a DirectCLR head stepped on ResNet-18."
    # three settings of its thirteen (the other heads are stepped at smoke, in the preflight's notebook): 64 s -> ~25 s
    rep = pf.preflight('gpu', sections=[4], overrides=['settings=none,mlp2,directclr'], steps=1,
                       price=lambda profile, runs, by_id: [f'priced {len(runs)} runs'],
                       **TINY)                                       # the price itself: repro.price's notebook
    assert rep.failures == [], rep.failures
    assert rep.runs == rep.distinct > len(rep.paths) == 3 and all(p.step_s and p.step_s > 0 for p in rep.paths)
    assert rep.seconds['04_directclr'] > 0 and rep.largest[1]['total'] > rep.largest[1]['model'] > 0
    assert 'stepped at batch <= 4, side <= 8 px' in pf.report_text(rep)      # the reduction is said
    text = pf.report_text(rep)                    # each path's step, and the price on the GPU (repro.price)
    assert text.count(' ms at batch ') == len(rep.paths) and f'priced {rep.distinct} runs' in text, text


def test_paper_profile_plans_imagenet_and_tiny_imagenet_runs():
    "05b paper: Table 4 (ImageNet, placeholder root) plans (bug 2), CLOP on the TIN role fits (bug 3): checked, unstepped."
    rep = pf.preflight('paper', only=['margins.table4', 'clop.table1'], steps=0, **TINY)
    assert rep.failures == [] and rep.planned_only, rep.failures
    names = [r[0] for p in rep.paths for r in p.runs]
    assert any('m_in1k' in n for n in names) and any('imagefolder' in n and 'c_lambda' in n for n in names)
    assert any('data_path_in1k' in n for n in rep.notes)


def test_reintroduced_bug_2_fails_naming_the_notebook(monkeypatch, capsys):
    "imagenet_runs putting 'method' back into the overrides: the plan fails, the exit is 1, the notebook is named."
    orig = pm.imagenet_runs
    monkeypatch.setattr(pm, 'imagenet_runs', lambda path: {k: {**v, 'method': k[0]} for k, v in orig(path).items()})
    code = pf.cli('paper', only=['margins.table4'], steps=0, **{k: v for k, v in TINY.items() if k != 'log'})
    out = capsys.readouterr().out
    assert code == 1 and "FAILED 05b_prototypes_margins (planning): TypeError" in out and "'method'" in out, out


def test_reintroduced_bug_3_fails_naming_the_runs(monkeypatch, capsys):
    "CLOP on Tiny-ImageNet's 200 classes at the base's 128 dimensions: every such run named, before any step."
    monkeypatch.setattr(pm, 'CLOP_TIN_OUT', 128)
    # steps=0: planned and checked only, so the failures are those found before any step (and the test takes seconds)
    code = pf.cli('paper', only=['clop.table1'], steps=0, **{k: v for k, v in TINY.items() if k != 'log'})
    out = capsys.readouterr().out
    assert code == 1, out
    bad = [l for l in out.splitlines() if l.strip().startswith('FAILED')]
    assert bad and all('05b_prototypes_margins[setting=group=c_lambda:dataset=imagefolder' in l
                       and "CLOP's orthonormal prototypes need num_classes <= dim" in l and '200 classes' in l
                       for l in bad), bad
    assert 'none stepped (steps=0' in out, out


def test_step_failure_is_named(monkeypatch):
    "A code path that raises while stepping fails the preflight with the run's name."
    import cosine_pitfalls.methods as methods
    orig = methods.SSLMethod.forward
    def broken(self, views, y=None):
        if self.cfg.method == 'directclr': raise RuntimeError('boom in directclr')
        return orig(self, views, y)
    monkeypatch.setattr(methods.SSLMethod, 'forward', broken)
    # two paths of section 4 (a head without a projector, and DirectCLR's), the healthy one stepped without failure
    rep = pf.preflight('smoke', sections=[4], overrides=['settings=none,directclr'], steps=1, **TINY)
    assert len(rep.paths) == 2 and rep.failures, (rep.paths, rep.failures)
    assert all('directclr' in w and 'boom in directclr' in m for w, m in rep.failures), rep.failures


def _live_tensors() -> int:
    import gc, torch
    gc.collect()
    return sum(1 for o in gc.get_objects() if torch.is_tensor(o))


def test_preflight_keeps_nothing_of_a_path_alive(monkeypatch):
    """Issue 20: every model the preflight builds (its steps, its activation and memory measures) is freed once
    it returns, and no tensor it made is still live (the paper preflight grew 0.2-0.3 GB a path and stalled)."""
    import gc, weakref
    import cosine_pitfalls.train as tr
    built, orig = [], tr.build_model
    def tracked(*a, **k):
        m = orig(*a, **k); built.append(weakref.ref(next(m.parameters()))); return m
    monkeypatch.setattr(tr, 'build_model', tracked); monkeypatch.setattr(pf, 'build_model', tracked)
    three = dict(sections=[4], overrides=['settings=none,mlp2,directclr'], steps=1, **TINY)   # three paths
    pf.preflight('smoke', **three)                                   # warm-up: torch's own lazy state, once
    before = _live_tensors(); built.clear()
    rep = pf.preflight('smoke', **three)                             # every model of this pass must be freed
    assert rep.failures == [] and len(rep.paths) == 3, rep.failures
    gc.collect()
    alive = [r() for r in built if r() is not None]
    assert built and not alive, f'the weights of {len(alive)} of {len(built)} models built are still alive'
    assert _live_tensors() - before < 20, (before, _live_tensors())


def test_saved_bytes_frees_the_forward_graph():
    "The saved-tensor hooks of `_saved_bytes` close no cycle: the model and its forward's tensors are freed."
    import gc, weakref, torch
    from torch import nn
    m = nn.Sequential(nn.Linear(8, 8), nn.Tanh(), nn.Linear(8, 8), nn.ReLU())
    net = lambda views, y: m(views[0]).sum()
    got = pf._saved_bytes(net, [torch.randn(4, 8)], None)
    assert got >= 4 * 8 * 4 * 3, got                               # Linear's input, Tanh's and ReLU's outputs
    ref = weakref.ref(m[0].weight); del m, net; gc.collect()
    assert ref() is None, 'the weights are still alive after the measure'
