"""A 12th method written outside the package (issue 26): NNCLR (Dwibedi et al. 2021) in one class, by subclassing
`SSLMethod` and registering it, then trained a few steps through the public `train` on the embedded digits. What a
user reads to write it is `SSLMethod`'s docstring; the registry's eleven classes are counted here too."""
import inspect, math

import pytest
import torch
import torch.nn.functional as F

from cosine_pitfalls import methods
from cosine_pitfalls.losses import InfoNCE, MemoryBank
from cosine_pitfalls.methods import MethodConfig, SSLMethod, register_method
from cosine_pitfalls.models import make_backbone
from cosine_pitfalls.train import TrainConfig, train


@register_method
class NNCLR(SSLMethod):
    "NNCLR: each view's positive is its nearest neighbour in a support set of past embeddings (stop-gradient)."
    name, contrastive = 'nnclr', True                  # contrastive: L_VRNS may be added, SyncBN under DDP
    published = dict(proj=(2, 2048, 256, False), pred=(4096, 256), temperature=0.1, ema=None)
    support_size = 512                                 # an option of this method only: a class attribute

    def make_objective(self, cfg, generator):
        self.support = MemoryBank(self.support_size, self.projector.out_dim, generator)   # past embeddings
        return InfoNCE(cfg.resolved('temperature'))
    def networks(self, views, z1, z2): return dict(p1=self.predictor(z1), p2=self.predictor(z2))
    def nearest(self, z):                                                 # (B, d) -> (B, d) unit vectors
        return self.support.queue[(F.normalize(z, dim=-1) @ self.support.queue.T).argmax(-1)]
    def loss(self, z1, z2, labels, p1, p2):
        with torch.no_grad(): n1, n2 = self.nearest(z1), self.nearest(z2)            # stop-gradient
        loss = (self.objective(n1, p2) + self.objective(n2, p1)) / 2
        self.support.enqueue(F.normalize(z1.detach(), dim=-1))
        return loss


SMALL = dict(dataset='digits', image_size=8, backbone='small_cnn', width=8, batch_size=64, head_width=32, head_out=16,
             eval_every=0, diag_samples=64, knn_k=20, device='cpu', seed=0, show_progress=False, checkpoint_every=0)


def test_the_12th_method_trains_through_train():
    ds = train(TrainConfig(method='nnclr', epochs=1, steps_per_epoch=6, **SMALL))
    assert ds.attrs['status'] == 'ok' and ds.attrs['method'] == 'nnclr'
    losses = ds['step_loss'].values.ravel()
    assert len(losses) == 6 and all(math.isfinite(v) for v in losses)
    assert 0 <= ds.attrs['final_knn_top1'] <= 1


def test_the_12th_method_is_one_class_like_the_others():
    model = SSLMethod(MethodConfig('nnclr', head_width=16, head_out=8), make_backbone('small_cnn', 1, 8))
    assert type(model) is NNCLR and isinstance(model, SSLMethod)
    assert set(dict(model.named_children())) == {'backbone', 'projector', 'predictor', 'support', 'objective'}
    g = torch.Generator().manual_seed(0)
    out = model([torch.randn(6, 1, 8, 8, generator=g) for _ in range(2)])
    out.loss.backward()
    assert torch.isfinite(out.loss) and all(p.grad is not None for p in model.backbone.parameters())
    assert int(model.support.queue_ptr) == 6                                        # the support set moved
    with pytest.raises(ValueError, match="vrns_weight applies to the contrastive methods"):
        MethodConfig('byol', vrns_weight=1.0)                      # the base's checks know the new method's flags
    MethodConfig('nnclr', vrns_weight=1.0)


def test_registry_holds_eleven_small_classes():
    assert methods.METHODS == ('simclr', 'dcl', 'supcon', 'moco_v2', 'moco_v3', 'byol', 'simsiam', 'dino',
                               'barlow_twins', 'vicreg', 'directclr')
    for name in methods.METHODS:
        cls = methods.method_class(name)
        assert cls.__module__ == 'cosine_pitfalls.methods' and cls.name == name
        assert len(inspect.getsource(cls).splitlines()) <= 80, name
    assert 'register_method' in SSLMethod.__doc__ and 'loss(' in SSLMethod.__doc__    # how to add one
    with pytest.raises(ValueError, match="method must be one of 'simclr'"): MethodConfig('nncrl')
