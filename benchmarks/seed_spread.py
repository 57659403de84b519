"""The seed spread of accuracy differences that a finished reproduction measured, for the gpu profile's power statement
(`repro.power.SEED_SPREAD`).

Reads every training result's summary (`results/<ID>.json`) of an output folder and, for each part the gate judged as
a paired comparison over seeds, the paired mean difference and its standard error as the gate printed them
(`Comparison`: "<label> <diff> ± <se> (p = …"). The seed spread of the paired difference is se·√n. Only accuracy parts
are kept: those of an ID whose registered paper effects are all accuracies, or whose label names kNN or top-1, less
any part on a norm (‖z‖) and any one-sample part (a kNN against the chance band: not a difference of two settings);
margins' parts are in points and are converted to fractions. Writes the rows and their summary as JSON.

    python benchmarks/seed_spread.py OUT_FOLDER --out benchmarks/measured/<date>_cpu/seed_spread.json
"""
import argparse, json, math, re, statistics, sys
from pathlib import Path

from cosine_pitfalls.repro.paper import PAPER, effects_of
from cosine_pitfalls.repro.power import is_accuracy

PART = re.compile(r'^(?:\[control, shown only\] )?(?P<label>.+?) (?P<diff>[+-]\d+\.\d+) ± (?P<se>\d+\.\d+) \(p = ')


def rows_of(out: Path) -> list[dict]:
    rows = []
    for f in sorted((out/'results').glob('[!.]*.json')):
        s = json.loads(f.read_text())
        i, n = s['id'], s.get('params', {}).get('n_seeds')
        if PAPER[i].section < 4 or not n or n < 2: continue
        all_acc = bool(effects_of(i)) and all(is_accuracy(e.unit) for e in effects_of(i))
        points = any('points' in e.unit for e in effects_of(i))
        for verdict, text in s['parts']:
            m = PART.match(text)
            if not m: continue
            label = m['label']
            if not (all_acc or re.search(r'kNN|top-1', label)) or '‖' in label or 'chance band' in label: continue
            scale = 0.01 if points else 1.0                     # margins' top-1 in points -> a fraction
            se = float(m['se']) * scale
            rows.append(dict(id=i, part=label, diff=float(m['diff']) * scale, se=se, n=n, sd=se * math.sqrt(n),
                             profile=s['profile'], shown=text.startswith('[control')))
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('folder', type=Path, help='a reproduction output folder (its results/*.json)')
    ap.add_argument('--out', type=Path, required=True, help='the JSON file to write')
    a = ap.parse_args(argv)
    rows = rows_of(a.folder)
    if not rows: sys.exit(f'no paired accuracy comparison over seeds in {a.folder}/results')
    man = json.loads((a.folder/'manifest.json').read_text())
    sds = sorted(r['sd'] for r in rows if r['sd'] > 0)
    rec = dict(source=str(a.folder), profile=rows[0]['profile'], git_sha=man.get('git_sha'),
               dates=sorted({r['started'][:10] for r in man['runs'] if r.get('section', 0) >= 4}),
               unit='accuracy (fraction)', parts=len(rows), median_sd=statistics.median(sds), min_sd=sds[0],
               max_sd=sds[-1], rows=rows)
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(rec, indent=1, ensure_ascii=False) + '\n')
    print(f"{len(rows)} accuracy parts ({', '.join(sorted({r['id'] for r in rows}))}): seed spread of the paired "
          f"difference median {rec['median_sd']:.4f}, range {rec['min_sd']:.4f}-{rec['max_sd']:.4f} -> {a.out}")


if __name__ == '__main__': main()
