"""What a reader opens: report.html and the rendered notebooks of the shared smoke reproduction of every section
(`conftest.smoke`).

The images and local links of report.html are checked twice: always on the parsed HTML (`report_problems`), and in
headless Chromium driven by chromedriver where both are installed (Debian: `apt-get install chromium chromium-driver`);
without them the browser test is skipped and says so (`pytest -rs`), unless $COSINE_PITFALLS_REQUIRE_BROWSER is set
(CI sets it, after installing both): then their absence fails it.
"""
import contextlib, json, os, re, shutil, subprocess, sys, time, urllib.parse
from html.parser import HTMLParser
from pathlib import Path

import nbformat
import pytest
from nbformat.sign import NotebookNotary

from conftest import NBS, read_json, run_cli

from cosine_pitfalls.repro.paper import NOTEBOOKS, PAPER, notebook_of, section_ids
from cosine_pitfalls.repro.report import report_problems

WIDGET_VIEW = 'application/vnd.jupyter.widget-view+json'
IDS = list(PAPER)
CHROMIUM_FLAGS = ('--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
                  '--disable-background-networking', '--disable-component-update', '--disable-sync',
                  '--disable-dev-shm-usage', '--window-size=1400,1000')


def _figures(out):
    return [i for i in IDS if (out/'figures'/f'{i}.png').exists()]


def test_report_html_parsed(smoke):
    "Every image of report.html decodes, every local link finds its file and anchor (html.parser, no browser)."
    out, _ = smoke
    print('checked on the parsed HTML (html.parser)')
    assert report_problems(out/'report.html') == []
    rep = (out/'report.html').read_text()
    assert rep.count('<img src="data:image/png;base64,') == len(_figures(out)) > 0
    for i in IDS:
        page = f"notebooks/{notebook_of(i).stem}.smoke.html"
        assert f'<a href="{page}#{i}"><code>{i}</code></a>' in rep, i
        assert f'id="{i}"' in (out/page).read_text(), i


def test_pages_and_report_carry_no_workshop_words(smoke):
    "report.md, report.html and every rendered page: no issue number, fixture or folder name of ours (a reader's text)."
    from test_notebook_shape import workshop_words
    out, _ = smoke
    texts = {p.name: p.read_text(encoding='utf-8') for p in [out/'report.md', out/'report.html',
                                                            *sorted((out/'notebooks').glob('*.html'))]}
    assert len(texts) >= 8, sorted(texts)
    found = {name: workshop_words(t) for name, t in texts.items() if workshop_words(t)}
    assert not found, found


FIRST_FIGURE_LINES = 60   # lines of visible code a reader of a section page scrolls past before its first figure


def visible_code_before_first_figure(page: str) -> int | None:
    "Lines of code shown (not folded in a <details>) before a page's first figure; None where it has no figure."
    import re
    shown = re.sub(r'<details\b.*?</details>', '', page, flags=re.S)
    at = shown.find('<img')
    if at < 0: return None
    pres = re.findall(r'<div class="highlight[^"]*"><pre>(.*?)</pre>', shown[:at], flags=re.S)
    return sum(len(p.strip('\n').splitlines()) for p in pres)


def test_a_page_reaches_its_first_figure_soon(smoke):
    """Each rendered section page folds the code that prints nothing (the package's code and its checks) and shows its
    results at a glance after the claims: its first figure comes within `FIRST_FIGURE_LINES` lines of visible code."""
    out, _ = smoke
    lines = {p.name: visible_code_before_first_figure(p.read_text(encoding='utf-8'))
             for p in sorted((out/'notebooks').glob('0[1-5]*.html'))}
    assert len(lines) == 6 and all(v is not None for v in lines.values()), lines
    assert all(v <= FIRST_FIGURE_LINES for v in lines.values()), lines
    p = (out/'notebooks'/'05b_prototypes_margins.smoke.html').read_text(encoding='utf-8')
    assert p.index('Results at a glance') < p.index('id="clop.fig6"'), 'the summary follows the claims'
    assert '<details class="folded-code"><summary>Code (' in p and 'exported to the package</summary>' in p


def figures_under_headings(page: str, ids: list[str]) -> dict:
    """Each heading of result IDs on a page (one heading may name several: its anchors stand together, only markup
    between them) -> the number of images between it and the next result heading."""
    at = sorted((m.start(), m.end(), i) for i in ids for m in re.finditer(rf'id="{re.escape(i)}"', page))
    groups = []
    for start, end, i in at:
        gap = page[groups[-1][1]:start] if groups else ''
        if groups and not re.sub(r'<[^>]*(?:>|$)|\s', '', gap.split('>', 1)[-1]):    # only markup since the last anchor
            groups[-1] = (groups[-1][0], end, groups[-1][2] + (i,))
        else: groups.append((start, end, (i,)))
    return {g[2]: page.count('<img', g[1], groups[k + 1][0] if k + 1 < len(groups) else len(page))
            for k, g in enumerate(groups)}


def test_every_figure_shows_under_its_result(smoke):
    """A reader who follows an ID from the report lands on its heading and finds its figure below it, before the next
    result: on every section page, each heading has at least as many images as its IDs have figures on disk."""
    out, _ = smoke
    missing = {}
    for f, nb in NOTEBOOKS.items():
        ids = [i for i in IDS if notebook_of(i).file == f]
        page = (out/'notebooks'/f'{nb.stem}.smoke.html').read_text(encoding='utf-8')
        for group, n in figures_under_headings(page, ids).items():
            want = sum((out/'figures'/f'{i}.png').exists() for i in group)
            if n < want: missing[group] = (n, want)
    assert not missing, missing                   # heading's IDs -> (images under it, figures on disk)


def test_the_heading_groups_are_read_as_a_reader_sees_them():
    page = ('<h3 id="a.x"><a id="a.y"></a>a.x, a.y</h3><p>text</p><img src="1.png"><img src="2.png">'
            '<h3 id="a.z">a.z</h3><p>none</p>')
    assert figures_under_headings(page, ['a.x', 'a.y', 'a.z']) == {('a.x', 'a.y'): 2, ('a.z',): 0}


def test_the_figure_count_sees_code(tmp_path):
    page = ('<div class="highlight hl-ipython3"><pre>a = 1\nb = 2\n</pre></div>'
            '<details class="folded-code"><summary>Code</summary><div class="highlight hl-ipython3"><pre>x\ny\nz</pre>'
            '</div></details><img src="x.png">')
    assert visible_code_before_first_figure(page) == 2
    assert visible_code_before_first_figure('<p>no figure</p>') is None


def test_executed_notebooks_read_well(smoke):
    "Title first, no TqdmWarning, bars saved as widgets (text: their last line), trusted; one line each on the page."
    (out, _), bars = smoke, 0
    for f in NOTEBOOKS:
        stem = Path(f).stem
        nb = json.loads((out/'runs'/f'{stem}.smoke.ipynb').read_text())
        first = nb['cells'][0]
        assert first['cell_type'] == 'markdown' and ''.join(first['source']).startswith('# '), stem
        text = json.dumps(nb)
        assert 'TqdmWarning' not in text and 'IProgress not found' not in text, stem
        views = [o['data'] for c in nb['cells'] for o in c.get('outputs', []) if WIDGET_VIEW in o.get('data', {})]
        if f != '01_gradients.ipynb':                                        # 01 draws no progress bar
            assert 'widgets' in nb['metadata'], stem                        # the bars' state, for JupyterLab
        assert not [v for v in views if re.match(r'\D*\b0%\|', ''.join(v['text/plain']))], stem  # not the first line
        assert NotebookNotary().check_signature(nbformat.read(out/'runs'/f'{stem}.smoke.ipynb', as_version=4))
        page = (out/'notebooks'/f'{stem}.smoke.html').read_text()
        assert 'widget-view+json' not in page and 'widget-state+json' not in page, stem
        hidden = [c for c in nb['cells'] if c['cell_type'] == 'code' and ''.join(c['source']).startswith('#| hide')]
        assert hidden and '#| hide' not in page, stem                         # nbdev's hidden cells are not shown
        folded = [d for d in _Details.of(page) if 'injected-parameters' in d['class']]
        assert len(folded) == 1 and not folded[0]['open'], (stem, folded)     # papermill's copy: one closed <details>
        assert 'profile' in folded[0]['summary'] and 'out_dir' in folded[0]['summary'], folded[0]['summary']
        bars += len(re.findall(r'(?:it/s|s/it)\]</pre>', page))   # a bar, as the line it ended on (s/it when slow)
    assert bars > 0                  # section 3's 'base losses' bar stays; the bars with leave=False are hidden


class _Details(HTMLParser):
    "Each <details> of a page: its class, whether it opens, its summary's text."
    def __init__(self): super().__init__(); self.found, self._summary = [], False
    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == 'details': self.found.append(dict(cls=a.get('class', ''), open='open' in a, summary=''))
        self._summary = self._summary or tag == 'summary'
    def handle_endtag(self, tag): self._summary = self._summary and tag != 'summary'
    def handle_data(self, data):
        if self._summary and self.found: self.found[-1]['summary'] += data
    @classmethod
    def of(cls, page: str) -> list[dict]:
        p = cls(); p.feed(page); return [dict(d, **{'class': d.pop('cls')}) for d in p.found]


REQUIRE_BROWSER = 'COSINE_PITFALLS_REQUIRE_BROWSER'   # set (CI does): no Chromium is a failure, not a skip


def _browser():
    "(chromium, chromedriver) paths, or None with the reason."
    chromium = next((shutil.which(b) for b in ('chromium', 'chromium-browser', 'google-chrome') if shutil.which(b)), None)
    driver = shutil.which('chromedriver') or (Path('/usr/bin/chromedriver') if Path('/usr/bin/chromedriver').exists()
                                              else None)
    if not (chromium and driver):
        return None, ('no Chromium/chromedriver here (apt-get install chromium chromium-driver): report.html was '
                      'checked on the parsed HTML only (test_report_html_parsed)')
    try: import selenium  # noqa: F401
    except ImportError: return None, 'selenium is not installed: report.html was checked on the parsed HTML only'
    return (chromium, str(driver)), ''


# an offline machine cannot fetch the one script the pages take from a CDN (MathJax, loaded async: the equations
# stay in TeX); its failed load is the only console error allowed, and only as a failed load of that address
OFFLINE_OK = re.compile(r'^https://cdnjs\.cloudflare\.com/ajax/libs/mathjax/\S+ - Failed to load resource: '
                        r'net::ERR_\w+$')


def _console_errors(drv) -> list[str]:
    "The browser console's errors since the last call, less the offline MathJax load."
    return [e['message'] for e in drv.get_log('browser') if e['level'] == 'SEVERE' and not OFFLINE_OK.match(e['message'])]


def test_report_html_in_chromium(smoke, tmp_path):
    """Headless Chromium opens report.html and every rendered section page it links: every <img> loads (naturalWidth
    > 0), every local link finds its file, every ID's link lands on the heading that names the ID, and the console
    shows no error (the offline MathJax load aside)."""
    found, why = _browser()
    if not found:
        if os.environ.get(REQUIRE_BROWSER): pytest.fail(f'${REQUIRE_BROWSER} is set but {why}')
        pytest.skip(why)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    chromium, driver = found
    out, _ = smoke
    opts = webdriver.ChromeOptions()
    opts.binary_location = chromium
    for a in (*CHROMIUM_FLAGS, f'--user-data-dir={tmp_path/"profile"}'): opts.add_argument(a)
    opts.page_load_strategy = 'eager'              # the rendered notebooks ask a CDN for MathJax; no network here
    opts.set_capability('goog:loggingPrefs', {'browser': 'ALL'})
    drv = webdriver.Chrome(service=Service(executable_path=driver), options=opts)
    try:
        drv.set_page_load_timeout(60)
        drv.get((out/'report.html').as_uri())
        drv.execute_async_script("const done = arguments[0];"
                                 "Promise.all([...document.images].map(i => i.decode().catch(() => null))).then(done);")
        broken = drv.execute_script("return [...document.images].filter(i => !i.complete || i.naturalWidth === 0)"
                                    ".map(i => i.alt);")
        n_img = drv.execute_script('return document.images.length;')
        links = drv.execute_script('return [...document.links].map(a => a.href);')
        drv.save_screenshot(str(tmp_path/'report.png'))
        assert broken == [] and n_img == len(_figures(out)) > 0, broken
        errors = {'report.html': _console_errors(drv)}
        local = [urllib.parse.urlsplit(h) for h in links if h.startswith('file:')]
        pages = {}
        for u in local:
            pages.setdefault(urllib.parse.unquote(u.path), set()).add(urllib.parse.unquote(u.fragment))
        missing = [p for p in pages if not Path(p).is_file()]
        assert missing == [], missing
        landed = {}
        for p, frags in pages.items():
            frags.discard('')
            if not frags or not p.endswith('.html'): continue
            drv.get(Path(p).as_uri())
            for f in sorted(frags):
                landed[(Path(p).name, f)] = drv.execute_script(
                    "const id = arguments[0]; location.hash = encodeURIComponent(id);"
                    "const el = document.getElementById(id); if (!el) return 'no anchor';"
                    "const h = el.closest('h1, h2, h3, h4, h5, h6');"
                    "if (!h || !h.textContent.includes(id)) return 'not on a heading naming it';"
                    "const top = h.getBoundingClientRect().top;"
                    "const bottom = window.innerHeight + window.scrollY >= document.body.scrollHeight - 2;"
                    "return (Math.abs(top) < 2 || bottom) ? 'landed' : 'heading at ' + top;", f)
            errors[Path(p).name] = _console_errors(drv)
        assert set(landed.values()) == {'landed'}, {k: v for k, v in landed.items() if v != 'landed'}
        assert {f for _, f in landed} >= set(IDS)
        assert len(errors) == 1 + len(NOTEBOOKS), sorted(errors)          # the report and each section's page
        assert not any(errors.values()), {k: v for k, v in errors.items() if v}
        print(f'checked in headless Chromium ({chromium}): {n_img} images loaded, {len(landed)} anchors landed on '
              f'their headings, {len(errors)} pages without a console error; screenshot {tmp_path/"report.png"}')
    finally:
        drv.quit()


@contextlib.contextmanager
def _jupyterlab(tmp_path, folder: Path):
    """JupyterLab started from the venv as `make lab` starts it, serving `folder`, and headless Chromium:
    yields (driver, base URL, the server's kernels as a function)."""
    import socket, urllib.request
    found, why = _browser()
    if not found:
        if os.environ.get(REQUIRE_BROWSER): pytest.fail(f'${REQUIRE_BROWSER} is set but {why}')
        pytest.skip(why)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    spec = json.loads((Path(sys.prefix)/'share'/'jupyter'/'kernels'/'python3'/'kernel.json').read_text())
    assert spec['display_name'] == 'python3', 'the venv predates `make setup`\'s kernelspec (run `make setup`)'
    with socket.socket() as so: so.bind(('127.0.0.1', 0)); port = so.getsockname()[1]
    env = dict(os.environ, JUPYTER_RUNTIME_DIR=str(tmp_path/'runtime'), JUPYTER_CONFIG_DIR=str(tmp_path/'config'))
    base = f'http://127.0.0.1:{port}'
    with open(tmp_path/'lab.log', 'w') as log:
        lab = subprocess.Popen([sys.executable, '-m', 'jupyterlab', '--no-browser', f'--port={port}', '--allow-root',
                                '--ServerApp.token=', '--ServerApp.password=', f'--ServerApp.root_dir={folder}',
                                f'--LabApp.workspaces_dir={tmp_path/"workspaces"}',
                                f'--LabApp.user_settings_dir={tmp_path/"settings"}'],
                               stdout=log, stderr=subprocess.STDOUT, env=env)
    opts = webdriver.ChromeOptions(); opts.binary_location = found[0]
    for a in (*CHROMIUM_FLAGS, f'--user-data-dir={tmp_path/"profile"}'): opts.add_argument(a)
    def kernels():                                           # the server's word on the kernels it started
        with urllib.request.urlopen(f'{base}/api/kernels', timeout=5) as r: return json.load(r)
    drv = None
    try:
        t0 = time.time()
        while True:
            try: urllib.request.urlopen(f'{base}/api/status', timeout=2); break
            except OSError:
                assert lab.poll() is None and time.time() - t0 < 60, (tmp_path/'lab.log').read_text()[-2000:]
                time.sleep(0.3)
        drv = webdriver.Chrome(service=Service(executable_path=found[1]), options=opts)
        yield drv, base, kernels
    finally:
        if drv is not None: drv.quit()
        lab.terminate(); lab.wait(30)


def _kernel_idle(drv, kernels, log: Path):
    """Wait until the server holds a started kernel that is idle and the page has said 'idle' on three polls in a row
    (the indicator reads 'idle' for a moment before the kernel is asked for, then 'initializing')."""
    status = lambda: drv.execute_script("const e = document.querySelector('.jp-Notebook-ExecutionIndicator');"
                                        "return e ? e.getAttribute('data-status') : null")
    t0, seen, states = time.time(), 0, []
    while seen < 3 and time.time() - t0 < 120:
        states = [k['execution_state'] for k in kernels()]
        seen = seen + 1 if (states and set(states) == {'idle'} and status() == 'idle') else 0
        time.sleep(0.5)
    assert seen == 3, f'the kernel never came up: server {states}, page {status()!r}; lab log:\n' + log.read_text()[-2000:]


def test_jupyterlab_opens_a_source_notebook_unchanged_and_a_run_at_its_results(smoke, tmp_path):
    """JupyterLab, started from the venv as `make lab` starts it (headless Chromium, 1400×1000), in one session:
    - opens a section notebook of `nbs/` without marking it modified and writes nothing to it: the notebooks store the
      kernelspec and language_info it writes (issue 34.6: a reader's JupyterLab turned the tab modified and autosaved
      a diff);
    - opens the executed 05b (the longest) with its code collapsed: its first figure within `LAB_SCREENS` screens of
      scrolling from the top (measured at smoke: 9 screens; 31 before the inputs were collapsed; 04 and 05a 6 and 7,
      14 and 28 before, measured once the same way)."""
    out, _ = smoke
    folder = tmp_path/'nbs'; folder.mkdir()
    nb = folder/'03_clop_synthetic.ipynb'; shutil.copy(NBS/'repro'/nb.name, nb); before = nb.read_bytes()
    run = '05b_prototypes_margins.smoke.ipynb'; shutil.copy(out/'runs'/run, folder/run)
    with _jupyterlab(tmp_path, folder) as (drv, base, kernels):
        drv.get(f'{base}/lab/workspaces/w0/tree/{nb.name}')
        _kernel_idle(drv, kernels, tmp_path/'lab.log')
        time.sleep(3)                                            # the kernel's info has reached the document
        tabs = drv.execute_script("return [...document.querySelectorAll('.lm-TabBar-tab')]"
                                  ".filter(t => t.textContent.includes(arguments[0]))"
                                  ".map(t => t.classList.contains('jp-mod-dirty'))", nb.name)
        assert tabs == [False], f'the notebook opened as modified: {tabs}'
        drv.set_script_timeout(180)
        drv.get(f'{base}/lab/workspaces/w1/tree/{run}')         # a workspace of its own: only this notebook open
        screens = drv.execute_async_script(SCROLL_TO_FIRST_FIGURE, 200)
    assert nb.read_bytes() == before, 'JupyterLab wrote to the notebook'
    print(f'JupyterLab: the executed 05b reaches its first figure after {screens} screen(s)')
    assert screens is not None and screens <= LAB_SCREENS, screens


def visible_code_before_first_figure_in_lab(nb: dict) -> int | None:
    "Lines of code JupyterLab shows (inputs not collapsed) above an executed notebook's first image; None without one."
    n = 0
    for c in nb['cells']:
        if c['cell_type'] != 'code': continue
        if not c.get('metadata', {}).get('jupyter', {}).get('source_hidden'):
            n += len(''.join(c['source']).splitlines())
        if any('image/png' in o.get('data', {}) for o in c.get('outputs', [])): return n
    return None


def test_an_executed_notebook_reaches_its_first_figure_soon_in_jupyterlab(smoke):
    """The executed notebooks (`runs/`, what a reader opens in JupyterLab) collapse the inputs the page folds: the
    first figure of each comes within `FIRST_FIGURE_LINES` lines of code left open (only papermill's parameters)."""
    out, _ = smoke
    lines = {p.name: visible_code_before_first_figure_in_lab(json.loads(p.read_text(encoding='utf-8')))
             for p in sorted((out/'runs').glob('0[1-5]*.smoke.ipynb'))}
    assert len(lines) == 6 and all(v is not None for v in lines.values()), lines
    assert all(v <= FIRST_FIGURE_LINES for v in lines.values()), lines
    assert visible_code_before_first_figure_in_lab(dict(cells=[
        dict(cell_type='code', metadata={}, source='a\nb', outputs=[]),
        dict(cell_type='code', metadata={'jupyter': {'source_hidden': True}}, source='x', outputs=[]),
        dict(cell_type='code', metadata={}, source='c', outputs=[dict(data={'image/png': ''})])])) == 3


LAB_SCREENS = 12   # what remains: the claims, the settings prose and one placeholder line per collapsed cell
# scroll the notebook's panel one screen at a time until an image of an output lies in the window; the number of
# screens scrolled (JupyterLab renders only the cells near the window, so the page is read as a reader scrolls it)
SCROLL_TO_FIRST_FIGURE = """
const most = arguments[0], done = arguments[arguments.length - 1];
const shown = () => document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-WindowedPanel-outer');
let k = 0, t0 = Date.now(), panel = null;
const step = () => {
  const seen = [...panel.querySelectorAll('.jp-OutputArea img')].some(i => {
    const r = i.getBoundingClientRect(); return r.bottom > 0 && r.top < window.innerHeight; });
  if (seen) return done(k);
  if (k >= most || panel.scrollTop + panel.clientHeight >= panel.scrollHeight) return done(null);
  panel.scrollTop += panel.clientHeight; k += 1; setTimeout(step, 300);
};
const start = () => {                       // the notebook drawn: its panel holds cells
  panel = shown();
  if (panel && panel.querySelectorAll('.jp-Cell').length > 3) return setTimeout(step, 1500);
  if (Date.now() - t0 > 60000) return done(null);
  setTimeout(start, 300);
};
start();
"""


def test_fragile_verdicts_are_marked_and_counted(tmp_path):
    """A result whose summary says `fragile` (written by `results.SectionRun.save` from the Judgement) shows as
    `agree (fragile)` in report.md and report.html, its reason at the end of the ours cell and on the verdict (the
    title a reader hovers); the totals count it; a summary from before the gate, without the field, reads as not
    fragile. `cosine-pitfalls report` on summaries written by hand (no kernel)."""
    from conftest import run_main
    out, ids = tmp_path/'out', section_ids(2)[:3]
    (out/'results').mkdir(parents=True); (out/'tables').mkdir()
    why = 'cut gain: p = 0.0071 vs 0.01'
    extra = {ids[0]: dict(verdict='agree', fragile=True, fragile_why=why),
             ids[1]: dict(verdict='differ', fragile=False, fragile_why=''),
             ids[2]: dict(verdict='agree')}                                       # before the gate: no field
    for i, x in extra.items():
        (out/'tables'/f'{i}.md').write_text(f'# {i}\n')
        (out/'results'/f'{i}.json').write_text(json.dumps(dict(id=i, profile='cpu', ours='our number',
                                                               files=[f'tables/{i}.md'], job_hash='h', **x)))
    (out/'manifest.json').write_text(json.dumps(dict(results={}, runs=[])))
    r = run_main('report', '--out', out)
    assert r.returncode == 0, r.stderr
    md, page = (out/'report.md').read_text(), (out/'report.html').read_text()
    row = lambda i: md.split(f'| `{i}` |')[1].split('\n')[0]
    assert f'| our number — Fragile: {why} | cpu | agree (fragile) |' in row(ids[0])
    assert '| our number | cpu | differ |' in row(ids[1]) and '| our number | cpu | agree |' in row(ids[2])
    totals = next(l for l in md.splitlines() if l.startswith('Totals: '))
    assert totals.startswith('Totals: 2 agree (1 fragile), 1 differ, '), totals
    assert f'<span class="verdict agree fragile" title="fragile: {why}">agree (fragile)</span>' in page
    assert '<span class="verdict agree">agree</span>' in page and '<span class="verdict differ">differ</span>' in page
    assert 'Totals: 2 agree (1 fragile), 1 differ, ' in page
    assert '<code>testable</code>' in page and '<code>fragile</code>' in page
    assert report_problems(out/'report.html') == []
