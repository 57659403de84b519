#!/bin/bash
# The checks a lent GPU machine runs (developers' `device` tool; see CONTRIBUTING in nbs/index.ipynb).
# Usage, on the GPU machine, from the repository root, with the wheels the companion needs in .whl/:
#   bash tools/gpu_check.sh PART OUTDIR
# PART: env | preflight | section4 | nbtest | bench.  Every part tees its log into OUTDIR.
# The machine has torch but not papermill / nbdev: they travel as wheels (py3.12) and go to /tmp/site.
set -o pipefail
part=${1:?PART: env | preflight | section4 | nbtest | bench}; out=${2:?OUTDIR}
mkdir -p "$out"
if [ ! -d /tmp/site ] && ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    || { echo "wheel install failed"; exit 1; }
fi
export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1 MPLBACKEND=Agg
export JUPYTER_PATH=/tmp/site/share/jupyter   # nbconvert's templates, installed with the wheels
cp_() { python3 -c "import sys; from cosine_pitfalls.repro.cli import main; sys.exit(main(sys.argv[1:]))" "$@"; }
case $part in
  env)
    { nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
      python3 -c "import torch, sys; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', \
torch.version.cuda, 'cudnn', torch.backends.cudnn.version(), torch.cuda.get_device_name(0))"
      nproc; } 2>&1 | tee "$out/env.txt" ;;
  preflight)
    cp_ reproduce --profile "${PROFILE:-gpu}" --preflight 2>&1 | tee "$out/preflight.log" ;;
  section4)
    # CIFAR-10 cannot be downloaded there: the notebook's own fallback, ResNet-18 on the digits at 32x32x3
    cp_ reproduce --profile gpu --section 4 -p dataset=digits -p image_size=32 -p channels=3 --out /tmp/o4 \
      2>&1 | tee "$out/section4.log"; rc=$?
    tar czf "$out/section4_outputs.tgz" -C /tmp --exclude="*.pt" o4 2>/dev/null; exit $rc ;;
  nbtest)
    # only the notebooks with a `#| gpu` cell (all of them with FLAGS='gpu slow' took over 300 s on an H200), in
    # parallel; nbconvert is not among the wheels, so 91_report's page test cannot pass there
    # (each notebook's log under /tmp/nbt, their tails in one file: $OUT brings back at most 8 files)
    mkdir -p /tmp/nbt
    grep -l '"#| gpu' nbs/*/*.ipynb nbs/*.ipynb | xargs -P "${WORKERS:-6}" -I{} sh -c \
      'nbdev_test --path {} --flags "${FLAGS:-gpu}" --timing > "/tmp/nbt/$(basename {} .ipynb).log" 2>&1 \
       && echo "ok {}" || echo "FAILED {}"' 2>&1 | tee "$out/nbtest_gpu.log"
    tail -n 40 /tmp/nbt/*.log > "$out/nbtest_gpu_tails.log" ;;
  bench)
    # eager, then the step compiled (inductor), then compiled with CUDA graphs: each in its own process, its
    # figures side by side in that process (the three (b)/(c) ratios are each measured in one run)
    { python3 benchmarks/train_throughput.py --steps "${STEPS:-40}" --out "$out"
      python3 benchmarks/augment_calls.py --device cuda --out "$out"
      python3 benchmarks/train_throughput.py --steps "${STEPS:-40}" --compile --out "$out"
      python3 benchmarks/train_throughput.py --steps "${STEPS:-40}" --compile reduce-overhead --out "$out"
    } 2>&1 | tee "$out/bench.log" ;;
  *) echo "unknown PART '$part' (allowed: env, preflight, section4, nbtest, bench)"; exit 2 ;;
esac
