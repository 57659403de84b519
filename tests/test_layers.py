"""The two layers: the library (what a researcher imports into their own training) imports nothing of the
companion (the paper registry, verdicts, runner and section modules), and its light modules import only torch,
numpy and the standard library at module level. Read from the sources with `ast`, without importing them."""
import ast, sys
from pathlib import Path

import pytest

import cosine_pitfalls

PKG = Path(cosine_pitfalls.__file__).parent
# the library: notebooks 09-19; `diagnostics` (the collapse monitor) joins when its notebook lands
LIBRARY = {'utils', 'losses', 'similarity_losses', 'evaluation', 'data', 'models', 'mechanisms', 'methods',
           'train', 'diagnostics', 'plot'}
# the companion: notebooks 00 (paper, core), 01-05 (one module per section), 90 (runner)
COMPANION = {'paper', 'core', 'gradients', 'toy', 'clop_synthetic', 'directclr', 'embedding_norms',
             'prototypes_margins', 'runner', 'preflight'}
# imported by these at module level: nothing beyond torch, numpy and the standard library
LIGHT = {'utils', 'losses', 'similarity_losses', 'evaluation', 'mechanisms', 'diagnostics', 'plot'}
# torchvision only inside the functions that build a ResNet or load a dataset
NO_TOPLEVEL_TORCHVISION = {'models', 'data', 'methods'}


def modules() -> list[str]:
    return sorted(p.stem for p in PKG.glob('*.py') if not p.stem.startswith('_'))


def imports(name: str, toplevel: bool = False) -> list[tuple[str, int]]:
    "(module imported, line) for every import in `name`.py; with `toplevel`, only the module-level ones."
    tree = ast.parse((PKG/f'{name}.py').read_text(encoding='utf-8'))
    nodes = tree.body if toplevel else ast.walk(tree)
    out = []
    for n in nodes:
        if isinstance(n, ast.Import): out += [(a.name, n.lineno) for a in n.names]
        elif isinstance(n, ast.ImportFrom):
            if n.level:   # from .core import x / from . import core
                out += ([(f'cosine_pitfalls.{n.module}', n.lineno)] if n.module else
                        [(f'cosine_pitfalls.{a.name}', n.lineno) for a in n.names])
            elif n.module == 'cosine_pitfalls':   # from cosine_pitfalls import core
                out += [(f'cosine_pitfalls.{a.name}', n.lineno) for a in n.names]
            else: out.append((n.module, n.lineno))
    return out


def test_every_module_belongs_to_one_layer():
    assert not LIBRARY & COMPANION
    stray = [m for m in modules() if m not in LIBRARY | COMPANION]
    assert not stray, f'modules in neither layer (add them to LIBRARY or COMPANION here): {stray}'


@pytest.mark.parametrize('name', sorted(LIBRARY))
def test_library_imports_nothing_of_the_companion(name):
    if not (PKG/f'{name}.py').exists(): pytest.skip(f'{name}.py not in this checkout')
    bad = [(m, line) for m, line in imports(name)
           if m.startswith('cosine_pitfalls.') and m.split('.')[1] in COMPANION]
    assert not bad, f'library module {name} imports the companion: {bad}'


@pytest.mark.parametrize('name', sorted(LIGHT))
def test_light_modules_import_only_torch_numpy_stdlib(name):
    if not (PKG/f'{name}.py').exists(): pytest.skip(f'{name}.py not in this checkout')
    allowed = set(sys.stdlib_module_names) | {'torch', 'numpy', '__future__', 'cosine_pitfalls'}
    bad = [(m, line) for m, line in imports(name, toplevel=True) if m.split('.')[0] not in allowed]
    assert not bad, f'{name} imports at module level more than torch, numpy and the standard library: {bad}'


@pytest.mark.parametrize('name', sorted(NO_TOPLEVEL_TORCHVISION))
def test_torchvision_only_inside_functions(name):
    bad = [(m, line) for m, line in imports(name, toplevel=True) if m.split('.')[0] in ('torchvision', 'PIL')]
    assert not bad, f'{name} imports torchvision at module level: {bad}'


def test_the_checker_sees_a_companion_import(tmp_path, monkeypatch):
    "The parser catches the three spellings of an import of the companion."
    for src in ('from .core import SectionRun', 'from cosine_pitfalls import runner',
                'import cosine_pitfalls.paper'):
        (tmp_path/'fake.py').write_text(f'def f():\n    {src}\n')
        monkeypatch.setattr(sys.modules[__name__], 'PKG', tmp_path)
        found = [m for m, _ in imports('fake') if m.split('.')[-1] in COMPANION]
        assert len(found) == 1, src
