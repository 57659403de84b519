"The collapse monitor's Lightning callback in a real `lightning.Trainer` run on CPU (a dev dependency: never skipped)."
import csv

import lightning as L
import pytest
import torch
import torch.nn.functional as F
from lightning.pytorch.loggers import CSVLogger
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from cosine_pitfalls.diagnostics import CollapseMonitor, CollapseMonitorCallback

# log_every_n_steps=50 > the run's steps on purpose: the callback writes to the loggers itself
pytestmark = pytest.mark.filterwarnings('ignore:The number of training batches')


class Tiny(L.LightningModule):
    "A SimSiam-sized toy: a linear backbone, a Linear-BN-ReLU-Linear head, a negative-cosine loss."
    def __init__(self, out: str = 'dict'):
        super().__init__()
        self.backbone, self.out = nn.Linear(8, 16), out
        self.head = nn.Sequential(nn.Linear(16, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 4))
        self.seen = []                                    # what each step returned, and the module's mode

    def training_step(self, batch, batch_idx):
        x, = batch
        x1, x2 = x + 0.1 * torch.randn_like(x), x + 0.1 * torch.randn_like(x)
        r1 = self.backbone(x1)
        z1, z2 = self.head(r1), self.head(self.backbone(x2))
        loss = -F.cosine_similarity(z1, z2).mean()
        self.seen.append((z1.detach().clone(), z2.detach().clone(), r1.detach().clone(), self.training))
        if self.out == 'tensor': return loss
        if self.out == 'nan' and batch_idx == 0: z1 = z1.detach().clone(); z1[2, 0] = float('nan')   # one bad row
        return dict(loss=loss, a=z1, b=z2) if self.out == 'renamed' else dict(loss=loss, z1=z1, z2=z2, r=r1)

    def configure_optimizers(self): return torch.optim.SGD(self.parameters(), lr=0.1)


def fit(module, callback, tmp_path, epochs=2):
    torch.manual_seed(0)
    data = DataLoader(TensorDataset(torch.randn(96, 8)), batch_size=16)        # 6 steps per epoch
    trainer = L.Trainer(accelerator='cpu', devices=1, max_epochs=epochs, logger=CSVLogger(tmp_path, name='run'),
                        callbacks=[callback], enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, log_every_n_steps=50)
    trainer.fit(module, data)
    return trainer


def test_callback_logs_the_monitor_every_n_steps_and_per_epoch(tmp_path):
    module, cb = Tiny(), CollapseMonitorCallback(every_n_steps=4)
    trainer = fit(module, cb, tmp_path)
    # read-outs after batches 4 and 8 (every 4), at the end of epoch 1 (batches 5-6) and after 12
    assert [step for step, _ in cb.logged] == [4, 6, 8, 12]
    windows = [(0, 4), (4, 6), (6, 8), (8, 12)]
    assert all(training for *_, training in module.seen)          # the model stayed in training mode
    for (lo, hi), (_, got) in zip(windows, cb.logged):            # each read-out: exactly its steps' embeddings
        ref = CollapseMonitor()
        for z1, z2, r, _ in module.seen[lo:hi]: ref.update(z1, z2, r)
        want = ref.compute()
        assert set(got) == {f'collapse/{k}' for k in want}
        for k, v in want.items():
            assert got[f'collapse/{k}'] == pytest.approx(v, rel=1e-5, abs=1e-6, nan_ok=True), k
    assert got['collapse/pairs_seen'] == 4 * 16 and got['collapse/pairs_skipped'] == 0
    assert {'collapse/r_erank_centered', 'collapse/z_rankme', 'collapse/z_lidar', 'collapse/r_alpha_req'} <= set(got)
    # the loggers and callback_metrics have them
    rows = list(csv.DictReader(open(trainer.logger.log_dir + '/metrics.csv')))
    logged = [r for r in rows if r.get('collapse/z_rankme')]
    assert [int(r['step']) for r in logged] == [4, 6, 8, 12]
    assert float(logged[-1]['collapse/uniform']) == pytest.approx(got['collapse/uniform'], rel=1e-6)
    assert float(trainer.callback_metrics['collapse/neg_cos_var']) == pytest.approx(got['collapse/neg_cos_var'])


def test_callback_per_epoch_and_renamed_keys(tmp_path):
    module, cb = Tiny('renamed'), CollapseMonitorCallback(keys=('a', 'b', None), prefix='mon_')
    fit(module, cb, tmp_path, epochs=1)
    assert [step for step, _ in cb.logged] == [6]                 # every_n_steps=0: once, at the epoch's end
    got = cb.logged[0][1]
    assert got['mon_pairs_seen'] == 96 and 'mon_r_norm_mean' not in got and 0 < got['mon_z_erank_centered'] <= 4
    assert 1 <= got['mon_z_rankme'] <= 4 + 1e-3 and 1 <= got['mon_z_lidar'] <= 4 + 1e-3


def test_callback_skips_non_finite_rows_and_says_so(tmp_path):
    "A NaN row in one step: skipped and counted (a RuntimeWarning), the window not poisoned."
    module, cb = Tiny('nan'), CollapseMonitorCallback()
    with pytest.warns(RuntimeWarning, match='skipped 1 of 96 pairs'):
        fit(module, cb, tmp_path, epochs=1)
    got = cb.logged[0][1]
    assert got['collapse/pairs_skipped'] == 1 and got['collapse/pairs_seen'] == 96
    assert all(v == v for k, v in got.items() if 'alpha_req' not in k)      # no NaN but α-ReQ of a 4-wide z


def test_callback_says_what_training_step_must_return(tmp_path):
    with pytest.raises(ValueError, match="return a dict with 'loss', 'z1' and 'z2'"):
        fit(Tiny('tensor'), CollapseMonitorCallback(), tmp_path, epochs=1)


def test_the_monitor_imports_neither_lightning_nor_torchvision():
    import subprocess, sys
    code = ("import sys, cosine_pitfalls.diagnostics; "
            "print(sorted(m for m in ('lightning', 'pytorch_lightning', 'torchvision') if m in sys.modules))")
    out = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == '[]', out.stdout + out.stderr
