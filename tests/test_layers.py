"""The two layers and the import graph. The library (what a researcher imports into their own training, at the top of
the package) imports nothing of the companion (`cosine_pitfalls.repro`: the paper registry, verdicts, results, runner
and section modules), and its light modules import only torch, numpy and the standard library at module level. No
module imports itself through others, not even inside a function: a cycle says two modules are one concern, or that
a third is missing. Read from the sources with `ast`, without importing them."""
import ast, sys
from pathlib import Path

import pytest

import cosine_pitfalls

PKG = Path(cosine_pitfalls.__file__).parent
# the library: nbs/library/ (notebooks 09-19), at the top of the package
LIBRARY = {'utils', 'losses', 'similarity_losses', 'evaluation', 'data', 'models', 'mechanisms', 'dist', 'methods',
           'train', 'diagnostics', 'plot'}
# the companion: nbs/repro/, the subpackage `repro`
COMPANION = {f'repro.{m}' for m in ('paper', 'verdicts', 'results', 'gradients', 'toy', 'clop_synthetic', 'directclr',
                                     'embedding_norms', 'prototypes_margins', 'pins', 'plan', 'report', 'execute',
                                     'preflight', 'price', 'power', 'shards', 'cli')}
# imported by these at module level: nothing beyond torch, numpy and the standard library
LIGHT = {'utils', 'losses', 'similarity_losses', 'evaluation', 'mechanisms', 'dist', 'diagnostics', 'plot'}
# torchvision only inside the functions that build a ResNet or load a dataset
NO_TOPLEVEL_TORCHVISION = {'models', 'data', 'methods'}


def modules(pkg: Path = None) -> list[str]:
    "Every module of the package, dotted from its root ('losses', 'repro.plan'); `__init__` and `_modidx` aside."
    pkg = pkg or PKG
    return sorted('.'.join(p.relative_to(pkg).with_suffix('').parts) for p in pkg.rglob('*.py')
                  if not p.name.startswith('_'))


def _file(name: str, pkg: Path) -> Path: return pkg.joinpath(*name.split('.')).with_suffix('.py')


def imports(name: str, toplevel: bool = False, pkg: Path = None) -> list[tuple[str, int]]:
    """(module imported, line) for every import in module `name` (dotted, e.g. 'repro.plan'), in the three spellings
    (`import a.b`, `from a.b import c`, `from .b import c`; `from . import b` and `from cosine_pitfalls import b` name
    module `b`); with `toplevel`, only the module-level ones. Our own modules come back as 'cosine_pitfalls.<name>'."""
    pkg = pkg or PKG
    tree = ast.parse(_file(name, pkg).read_text(encoding='utf-8'))
    nodes = tree.body if toplevel else ast.walk(tree)
    here = ['cosine_pitfalls'] + name.split('.')[:-1]          # the package that holds `name`
    out = []
    for n in nodes:
        if isinstance(n, ast.Import): out += [(a.name, n.lineno) for a in n.names]
        elif isinstance(n, ast.ImportFrom):
            base = '.'.join(here[:len(here) - n.level + 1] + ([n.module] if n.module else [])) if n.level else n.module
            if base.split('.')[0] != 'cosine_pitfalls': out.append((base, n.lineno)); continue
            subs = [f'{base}.{a.name}' for a in n.names if _file(f'{base}.{a.name}'[16:], pkg).exists()]
            out += [(m, n.lineno) for m in subs] or [(base, n.lineno)]   # `from pkg import module` names the module
    return out


def graph(pkg: Path = None) -> dict[str, dict[str, int]]:
    "module -> {module of the package it imports (anywhere in it): first line}; the packages' `__init__`s left out."
    pkg = pkg or PKG; names = set(modules(pkg)); g = {}
    for m in names:
        g[m] = {}
        for imp, line in imports(m, pkg=pkg):
            t = imp[len('cosine_pitfalls.'):] if imp.startswith('cosine_pitfalls.') else None
            if t in names and t != m: g[m].setdefault(t, line)
    return g


def cycles(g: dict[str, dict[str, int]]) -> list[list[str]]:
    "One cycle through each strongly connected set of modules (Tarjan), as a path 'a -> b -> a'."
    index, low, stack, on, sccs = {}, {}, [], set(), []
    def visit(v):
        index[v] = low[v] = len(index); stack.append(v); on.add(v)
        for w in g[v]:
            if w not in index: visit(w); low[v] = min(low[v], low[w])
            elif w in on: low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            scc = []
            while True:
                w = stack.pop(); on.discard(w); scc.append(w)
                if w == v: break
            if len(scc) > 1: sccs.append(set(scc))
    for v in sorted(g):
        if v not in index: visit(v)
    out = []
    for scc in sccs:                                   # a shortest way back to the start, inside the set
        start = min(scc); paths = {start: [start]}; todo = [start]
        while todo:
            v = todo.pop(0)
            for w in sorted(g[v]):
                if w == start: out.append(paths[v] + [start]); todo = []; break
                if w in scc and w not in paths: paths[w] = paths[v] + [w]; todo.append(w)
    return out


def describe(cycle: list[str], g) -> str:
    return ' -> '.join(f'{a} (line {g[a][b]})' for a, b in zip(cycle, cycle[1:])) + f' -> {cycle[-1]}'


def test_every_module_belongs_to_one_layer():
    assert not LIBRARY & COMPANION
    stray = [m for m in modules() if m not in LIBRARY | COMPANION]
    assert not stray, f'modules in no layer (add them to LIBRARY or COMPANION here): {stray}'


def test_no_import_cycle():
    "Counting the imports inside functions: a cycle fails, named module by module with the importing lines."
    g = graph()
    assert set(g) >= LIBRARY | COMPANION
    found = cycles(g)
    assert not found, 'import cycles: ' + '; '.join(describe(c, g) for c in found)


@pytest.mark.parametrize('name', sorted(LIBRARY))
def test_library_imports_nothing_of_the_companion(name):
    if not _file(name, PKG).exists(): pytest.skip(f'{name}.py not in this checkout')
    bad = [(m, line) for m, line in imports(name)
           if m.startswith('cosine_pitfalls.') and m.split('.')[1] == 'repro']
    assert not bad, f'library module {name} imports the companion: {bad}'


@pytest.mark.parametrize('name', sorted(LIGHT))
def test_light_modules_import_only_torch_numpy_stdlib(name):
    if not _file(name, PKG).exists(): pytest.skip(f'{name}.py not in this checkout')
    allowed = set(sys.stdlib_module_names) | {'torch', 'numpy', '__future__'}
    bad = [(m, line) for m, line in imports(name, toplevel=True)
           if m.split('.')[0] not in allowed and not (m.startswith('cosine_pitfalls.') and m[16:] in LIGHT)]
    assert not bad, f'{name} imports at module level more than torch, numpy, the stdlib and light modules: {bad}'


@pytest.mark.parametrize('name', sorted(NO_TOPLEVEL_TORCHVISION))
def test_torchvision_only_inside_functions(name):
    bad = [(m, line) for m, line in imports(name, toplevel=True) if m.split('.')[0] in ('torchvision', 'PIL')]
    assert not bad, f'{name} imports torchvision at module level: {bad}'


def test_the_checker_sees_a_companion_import(tmp_path):
    "The parser catches the three spellings of an import of the companion, inside a function too."
    (tmp_path/'repro').mkdir()
    for m in ('verdicts', 'plan'): (tmp_path/'repro'/f'{m}.py').write_text('')
    for src in ('from .repro.verdicts import judge_all', 'from cosine_pitfalls.repro import plan',
                'import cosine_pitfalls.repro.plan', 'from .repro import verdicts'):
        (tmp_path/'fake.py').write_text(f'def f():\n    {src}\n')
        found = [m for m, _ in imports('fake', pkg=tmp_path) if m.split('.')[1] == 'repro']
        assert len(found) == 1, src


def test_the_checker_sees_a_cycle_inside_functions(tmp_path):
    "Yesterday's runner <-> preflight: each imported the other inside a function. The checker names that cycle."
    (tmp_path/'repro').mkdir()
    (tmp_path/'repro'/'runner.py').write_text('def main():\n    from cosine_pitfalls.repro.preflight import cli\n')
    (tmp_path/'repro'/'preflight.py').write_text('import os\n\ndef _plan():\n    from .runner import plan\n')
    (tmp_path/'repro'/'paper.py').write_text('')
    (tmp_path/'losses.py').write_text('def f():\n    from . import utils\n')
    (tmp_path/'utils.py').write_text('import torch\n')
    g = graph(tmp_path)
    assert g['repro.runner'] == {'repro.preflight': 2} and g['repro.preflight'] == {'repro.runner': 4}
    found = cycles(g)
    assert found == [['repro.preflight', 'repro.runner', 'repro.preflight']]
    assert describe(found[0], g) == 'repro.preflight (line 4) -> repro.runner (line 2) -> repro.preflight'
    (tmp_path/'repro'/'preflight.py').write_text('def _plan():\n    from .paper import PAPER\n')   # the cycle cut
    assert cycles(graph(tmp_path)) == []
