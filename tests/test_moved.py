"""The companion's old addresses keep working for one release (issue 26): each old module hands out the very object
of its new home, with a DeprecationWarning that names the new place; so do the renamed names and the distributed
helpers that left `mechanisms`."""
import importlib, warnings

import pytest

MOVED = [  # (old module, old name, new module, new name)
    ('core', 'judge_all', 'repro.verdicts', 'judge_all'), ('core', 'Part', 'repro.verdicts', 'Comparison'),
    ('core', 'Within', 'repro.verdicts', 'Equivalence'), ('core', 'SectionRun', 'repro.results', 'SectionRun'),
    ('core', 'PROFILES', 'repro.results', 'PROFILES'), ('core', 'check_choice', 'utils', 'check_choice'),
    ('core', 'PAPER', 'repro.paper', 'PAPER'), ('paper', 'PAPER', 'repro.paper', 'PAPER'),
    ('runner', 'plan', 'repro.plan', 'plan'), ('runner', 'reproduce', 'repro.execute', 'reproduce'),
    ('runner', 'write_reports', 'repro.report', 'write_reports'), ('runner', 'main', 'repro.cli', 'main'),
    ('preflight', 'preflight', 'repro.preflight', 'preflight'), ('preflight', 'Path_', 'repro.preflight', 'CodePath'),
    ('gradients', 'PROFILES', 'repro.gradients', 'PROFILES'), ('toy', 'PROFILES', 'repro.toy', 'PROFILES'),
    ('clop_synthetic', 'PROFILES', 'repro.clop_synthetic', 'PROFILES'),
    ('directclr', 'NEEDS', 'repro.directclr', 'SETTINGS_COMPARED'),
    ('embedding_norms', 'ms', 'repro.embedding_norms', 'mean_sd'),
    ('prototypes_margins', 'PROFILES', 'repro.prototypes_margins', 'PROFILES'),
    ('mechanisms', 'dist_info', 'dist', 'dist_info'), ('mechanisms', 'gather_with_grad', 'dist', 'gather_with_grad'),
    ('repro.verdicts', 'Part', 'repro.verdicts', 'Comparison'), ('repro.verdicts', 'Within', 'repro.verdicts', 'Equivalence'),
]


@pytest.mark.parametrize('old, name, new, new_name', MOVED, ids=[f'{o}.{n}' for o, n, *_ in MOVED])
def test_old_address_warns_and_gives_the_same_object(old, name, new, new_name):
    mod = importlib.import_module(f'cosine_pitfalls.{old}')
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter('always')
        obj = getattr(mod, name)
    assert obj is getattr(importlib.import_module(f'cosine_pitfalls.{new}'), new_name)
    assert [x.category for x in w] == [DeprecationWarning], [str(x.message) for x in w]
    assert f'cosine_pitfalls.{new}.{new_name}' in str(w[0].message)
    with pytest.warns(DeprecationWarning, match=f'cosine_pitfalls.{new}.{new_name}'):   # `from old import name` too
        exec(f'from cosine_pitfalls.{old} import {name}', {})


def test_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'no_such_name'"):
        importlib.import_module('cosine_pitfalls.core').no_such_name


def test_the_library_uses_its_moved_names_without_warning():
    "mechanisms' own code still calls dist_info: only an access from outside warns."
    import torch
    from cosine_pitfalls.mechanisms import nt_xent
    with warnings.catch_warnings():
        warnings.simplefilter('error', DeprecationWarning)
        nt_xent(torch.randn(4, 3), torch.randn(4, 3), 0.5)
