"""Write README.md from nbs/index.ipynb (Quarto, which nbdev_readme needs, cannot be installed here).

Markdown cells are copied as they are; code cells that are not `#| hide` become ```python blocks.
tests/test_package.py checks that README.md carries every markdown cell of the index.
Usage: python tools/readme_from_index.py   (from the repository root; or `make readme`)
"""
import json
from pathlib import Path

root = Path(__file__).resolve().parents[1]
parts = []
for cell in json.loads((root/'nbs'/'index.ipynb').read_text(encoding='utf-8'))['cells']:
    src = ''.join(cell['source']).strip()
    if cell['cell_type'] == 'markdown': parts.append(src)
    elif cell['cell_type'] == 'code' and not src.replace(' ', '').startswith('#|hide'): parts.append(f'```python\n{src}\n```')
tmp = root/'.README.md.tmp'
tmp.write_text('\n\n'.join(parts) + '\n', encoding='utf-8')
tmp.replace(root/'README.md')
print('wrote', root/'README.md')
