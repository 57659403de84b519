"Shared fixtures: the installed console script, the repository's notebooks, a helper to run the CLI."
import json, os, subprocess, sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NBS = ROOT/'nbs'
CLI = Path(sys.executable).parent/'cosine-pitfalls'
os.umask(0o022)   # the usual umask, inherited by every CLI run: the file-mode test expects 0644


def run_cli(*args, timeout=600, **kw):
    "Run the installed `cosine-pitfalls` console script; return the CompletedProcess."
    env = dict(os.environ, PYTHONUNBUFFERED='1')
    return subprocess.run([str(CLI), *map(str, args)], capture_output=True, text=True, timeout=timeout, env=env, **kw)


def tree(d: Path) -> dict:
    "Relative path -> bytes of every file under d (to prove nothing changed)."
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(Path(d).rglob('*')) if p.is_file()}


def read_json(p):
    return json.loads(Path(p).read_text())


@pytest.fixture
def cli():
    assert CLI.exists(), f'console script not installed at {CLI}'
    return run_cli
