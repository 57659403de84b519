"""Name the venv's python3 kernel 'python3' in JupyterLab (`make setup` runs this).

The notebooks store the kernelspec and language_info that JupyterLab writes when it opens them, so that opening one
changes nothing; nbdev_clean keeps language_info (settings.ini) but sets the kernelspec's display name to its name.
So the venv's python3 kernelspec (ipykernel's, in <venv>/share/jupyter/kernels/python3) gets that display name,
everything else as ipykernel wrote it: its command stays `python -m ipykernel_launcher`, which jupyter_client runs
with the Python of the process that starts the kernel (papermill's, JupyterLab's)."""
import json, sys
from pathlib import Path

spec = Path(sys.prefix)/'share'/'jupyter'/'kernels'/'python3'/'kernel.json'
d = json.loads(spec.read_text())
d.update(display_name='python3', argv=['python', '-m', 'ipykernel_launcher', '-f', '{connection_file}'])
spec.write_text(json.dumps(d, indent=1) + '\n')
print(f'{spec}: display name python3')
