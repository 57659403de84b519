"""Install the package with its `dev` extra, editable, into the venv whose Python runs this (`make setup`).

With uv where it can be fetched: on this project's two-core machine a fresh venv took 55 s with uv against 146 s
with pip (2026-11-29; torch's CUDA build is most of its 6 GB), and resolved the same 185 packages at the same
versions. uv does not read pip's configuration, so it is handed pip's own (`pip config list`: index, extra indexes,
find-links, constraints, no-index; the certificate through SSL_CERT_FILE), with pip's way of choosing among indexes
(the best version over all of them, `--index-strategy unsafe-best-match`) and bytecode compiled as pip does. Where uv
cannot be fetched or fails, pip installs, as before; the line printed says which did.

    python tools/install.py [--pip]      # --pip: pip only"""
import os, shlex, subprocess, sys, time

SPEC = ['-e', '.[dev]']
py = sys.executable


def pip_config() -> dict:
    "pip's effective settings: key -> value ('global.' < 'install.' < ':env:.', the later wins), quotes removed."
    out = subprocess.run([py, '-m', 'pip', 'config', 'list'], capture_output=True, text=True).stdout
    rank = lambda scope: {'global': 0, 'install': 1, ':env:': 2}.get(scope, -1)
    got = {}
    for line in out.splitlines():
        if '=' not in line: continue
        key, val = line.split('=', 1)
        scope, _, name = key.rpartition('.')
        if rank(scope) < 0: continue
        val = val.strip().strip("'\"")
        if name not in got or rank(scope) >= got[name][0]: got[name] = (rank(scope), val)
    return {k: v for k, (_, v) in got.items()}


def uv_args(cfg: dict) -> list:
    "The uv options that say what pip's configuration says."
    args = ['--index-strategy', 'unsafe-best-match', '--compile-bytecode']
    if cfg.get('index-url'): args += ['--index-url', cfg['index-url']]
    for u in shlex.split(cfg.get('extra-index-url', '')): args += ['--extra-index-url', u]
    for u in shlex.split(cfg.get('find-links', '')): args += ['--find-links', u]
    for u in shlex.split(cfg.get('constraint', '')): args += ['--constraint', u]
    if cfg.get('no-index', '').lower() in ('1', 'true', 'yes', 'on'): args += ['--no-index']
    return args


def with_pip() -> int:
    return subprocess.run([py, '-m', 'pip', 'install', '--quiet', *SPEC]).returncode


def main() -> int:
    bad = [a for a in sys.argv[1:] if a != '--pip']
    if bad: sys.exit(f"tools/install.py: unknown argument(s) {' '.join(bad)}; allowed: --pip (install with pip only)")
    t = time.time()
    if '--pip' not in sys.argv[1:]:
        cfg = pip_config()
        env = dict(os.environ)
        if cfg.get('cert') and not env.get('SSL_CERT_FILE'): env['SSL_CERT_FILE'] = cfg['cert']
        got = subprocess.run([py, '-m', 'pip', 'install', '--quiet', 'uv>=0.5,<1'], capture_output=True, text=True)
        if got.returncode == 0:
            r = subprocess.run([py, '-m', 'uv', 'pip', 'install', '--quiet', '--python', py, *uv_args(cfg), *SPEC],
                               env=env)
            if r.returncode == 0:
                print(f'installed .[dev] with uv in {time.time() - t:.0f} s'); return 0
            print('uv could not install .[dev] (above); pip installs it instead', file=sys.stderr)
        else: print('uv could not be fetched; pip installs .[dev]', file=sys.stderr)
    rc = with_pip()
    if rc == 0: print(f'installed .[dev] with pip in {time.time() - t:.0f} s')
    return rc


if __name__ == '__main__': sys.exit(main())
