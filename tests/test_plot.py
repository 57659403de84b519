"""`cosine-pitfalls plot` (issue 28.3): a run's history as one PNG, several runs overlaid, bad input refused before
anything is drawn, the PNG written atomically. Two small digits runs (2 epochs, ~10 s) are trained once."""
import errno, os, subprocess, sys
from pathlib import Path

import pytest

import cosine_pitfalls
from cosine_pitfalls.plot import load_run, main_plot, plot_run
from cosine_pitfalls.utils import read_nc

SRC = str(Path(cosine_pitfalls.__file__).parent.parent)   # the package these tests import, not another install


@pytest.fixture(scope='module')
def runs(tmp_path_factory):
    "Two SimCLR runs on the digits, the second cut-initialized; epoch 0 and a kNN every epoch."
    from cosine_pitfalls.data import load_dataset
    from cosine_pitfalls.train import TrainConfig, train
    base, digits = tmp_path_factory.mktemp('plot'), load_dataset('digits')
    small = dict(dataset='digits', epochs=2, steps_per_epoch=4, batch_size=64, lr=0.1, width=8, head_width=32,
                 head_out=16, eval_every=1, record_init=True, diag_samples=64, knn_k=20, show_progress=False,
                 threads=1)
    for name, c in (('plain', 1.0), ('cut', 3.0)):
        train(TrainConfig(**small, cut_c=c, out_dir=str(base/name)), data=digits)
    return base


def png_size(f: Path) -> tuple:
    from PIL import Image
    with Image.open(f) as im:
        im.verify()
        return im.size


def test_one_run_is_one_png_of_1600_by_1000(runs):
    out = plot_run(runs/'plain')
    assert out == runs/'plain'/'run.png' and png_size(out) == (1600, 1000)
    assert not [f for f in (runs/'plain').iterdir() if '.tmp' in f.name]


def test_two_runs_compared(runs, tmp_path):
    out = plot_run([runs/'plain', runs/'cut'], tmp_path/'figs'/'cmp.png')
    assert png_size(out) == (1600, 1000) and sorted(os.listdir(tmp_path/'figs')) == ['cmp.png']
    assert plot_run([runs/'plain', runs/'cut']) == runs/'compare.png' and (runs/'compare.png').exists()


def test_the_run_is_read_with_its_conventions(runs):
    ds, cfg = load_run(runs/'cut')
    assert cfg['cut_c'] == 3.0 and list(ds.epoch.values) == [0, 1, 2]
    assert 'uncentred' in ds.z_rankme.attrs['description']


def test_bad_input_is_refused_before_anything_is_drawn(runs, tmp_path):
    (tmp_path/'empty').mkdir(); (tmp_path/'dir.png').mkdir()
    (tmp_path/'damaged').mkdir(); (tmp_path/'damaged'/'run.nc').write_bytes(b'\x89HDF\r\n half a file')
    (tmp_path/'unfinished').mkdir(); (tmp_path/'unfinished'/'checkpoint.pt').write_bytes(b'')
    before = sorted(os.listdir(tmp_path))
    for bad, says in ((tmp_path/'nowhere', 'no such run folder'), (tmp_path/'empty', "no run.nc: not a run's"),
                      (tmp_path/'damaged'/'run.nc', 'not a folder'),
                      (tmp_path/'damaged', 'damaged: does not open as netCDF'),
                      (tmp_path/'unfinished', 'the run has not finished')):
        with pytest.raises(ValueError) as e: plot_run([runs/'plain', bad], tmp_path/'x.png')
        assert str(bad) in str(e.value) and says in str(e.value), e.value
    with pytest.raises(ValueError, match='must name a .png file'): plot_run(runs/'plain', tmp_path/'x.pdf')
    with pytest.raises(ValueError, match='is a folder'): plot_run(runs/'plain', tmp_path/'dir.png')
    with pytest.raises(ValueError, match='at least one run'): plot_run([], tmp_path/'x.png')
    assert sorted(os.listdir(tmp_path)) == before                                     # nothing written


def test_a_failed_write_leaves_no_partial_file(runs, tmp_path, monkeypatch, capsys):
    "A full disk while the PNG is written: exit code 1, one line, neither the PNG nor a temporary is left."
    from matplotlib.figure import Figure
    def full(self, fname, **kw):
        Path(fname).write_bytes(b'\x89PNG half')
        raise OSError(errno.ENOSPC, 'No space left on device')
    monkeypatch.setattr(Figure, 'savefig', full)
    assert main_plot([str(runs/'plain'), '--out', str(tmp_path/'x.png')]) == 1
    err = capsys.readouterr().err
    assert err.count('\n') == 1 and 'No space left on device' in err and os.listdir(tmp_path) == []


def test_command_line(runs, tmp_path, capsys):
    assert main_plot([str(runs/'plain'), str(runs/'cut')]) == 0                  # one PNG a run
    assert capsys.readouterr().out.split() == [str(runs/'plain'/'run.png'), str(runs/'cut'/'run.png')]
    assert main_plot([str(runs/'plain'), str(runs/'cut'), '--compare', '--out', str(tmp_path/'c.png')]) == 0
    assert png_size(tmp_path/'c.png') == (1600, 1000)
    for argv, says in (([str(runs/'plain'), str(tmp_path/'nowhere')], 'nowhere: no such run folder'),
                       ([str(runs/'plain'), str(runs/'cut'), '--out', str(tmp_path/'d.png')], 'give --compare')):
        capsys.readouterr()
        assert main_plot(argv) == 2
        err = capsys.readouterr().err
        assert err.startswith('cosine-pitfalls plot: error: ') and err.count('\n') == 1 and says in err, err
    assert main_plot([]) == 2 and 'RUN_DIR' in capsys.readouterr().err                # argparse's usage
    assert not (tmp_path/'d.png').exists()


def test_python_m_runs_it(runs, tmp_path):
    env = dict(os.environ, PYTHONPATH=SRC)
    r = subprocess.run([sys.executable, '-m', 'cosine_pitfalls.plot', str(runs/'cut'), '--out', str(tmp_path/'m.png')],
                       capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0 and r.stdout.strip() == str(tmp_path/'m.png'), r.stderr
    assert png_size(tmp_path/'m.png') == (1600, 1000)


def test_without_matplotlib_it_says_what_to_install(runs, tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, 'matplotlib', None)                     # as if it were not installed
    assert main_plot([str(runs/'plain'), '--out', str(tmp_path/'x.png')]) == 2
    err = capsys.readouterr().err
    assert 'needs matplotlib' in err and "pip install 'cosine_pitfalls[repro]'" in err and err.count('\n') == 1
    assert os.listdir(tmp_path) == []


def test_an_older_or_collapsed_run_draws_what_it_has(runs, tmp_path):
    "A run without LiDAR, RankMe and α-ReQ and with the centred rank under its old name; a run train called collapsed."
    ds = read_nc(runs/'plain'/'run.nc')
    old = ds.drop_vars(['z_erank_centered', 'r_erank_centered', 'z_lidar', 'z_rankme', 'r_rankme', 'z_alpha_req',
                        'r_alpha_req']).sel(epoch=[1, 2])
    (tmp_path/'old').mkdir(); old.to_netcdf(tmp_path/'old'/'run.nc', engine='h5netcdf')
    got, _ = load_run(tmp_path/'old')
    assert 'z_erank_centered' in got and 'z_lidar' not in got
    ds.attrs.update(status='collapsed', status_epoch=1)
    (tmp_path/'coll').mkdir(); ds.to_netcdf(tmp_path/'coll'/'run.nc', engine='h5netcdf')
    assert png_size(plot_run([tmp_path/'old', tmp_path/'coll'])) == (1600, 1000)


def test_the_console_script_routes_plot(runs, tmp_path):
    "`cosine-pitfalls plot RUN_DIR` is `main_plot` (its flags, its refusals, its exit codes)."
    from cosine_pitfalls.repro.cli import main
    assert main(['plot', str(runs/'plain'), '--out', str(tmp_path/'p.png')]) == 0
    assert png_size(tmp_path/'p.png') == (1600, 1000)
    assert main(['plot', str(tmp_path/'nowhere')]) == 2
