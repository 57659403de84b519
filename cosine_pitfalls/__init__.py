"""cosine_pitfalls: the cosine similarity in contrastive and self-supervised learning, as a library and as a
reproducible companion to five papers.

Two layers (see "Layout" in the README):

- **the library**, for one's own training; needs torch and numpy only (a plain `pip install`):
  `utils` (argument checks, seeds, devices, atomic writes), `losses`, `similarity_losses`, `mechanisms`,
  `evaluation`, `models` and `methods`; with the `train` extra also `data` and `train` (torchvision, xarray,
  scikit-learn). torchvision is imported only where a ResNet or a torchvision dataset is built.
- **the companion**, the subpackage `repro`, which reproduces the papers on top of the library (the `repro`
  extra): `repro.paper` (the registry of the papers' results), `repro.verdicts` (the rule), `repro.results`
  (profiles, `SectionRun`), one module per paper section (`repro.gradients`, `.toy`, `.clop_synthetic`,
  `.directclr`, `.embedding_norms`, `.prototypes_margins`) and the runner (`repro.plan`, `.pins`, `.execute`,
  `.report`, `.preflight`, `.price`, `.shards`, `.cli`: the `cosine-pitfalls` command). The library imports nothing of the companion.

This file is written by hand; nbdev_export only updates the `__version__` line below.
"""
__version__ = "0.1.0"
