#!/usr/bin/env bash
# The throughput table of bench/throughput.py on a GPU, then the drain of bench/drain.py
# with the same model (2,000 one-segment jobs queued first, then one worker): one
# command, meant to finish within 8 minutes. The table took about 90 s on an NVIDIA H200
# with 200 small jobs, the model's build included; its 2,000 small jobs and the drain's
# three runs should add about two minutes (not yet timed on a GPU). Arguments go to the
# table alone and skip the drain. Needs the project's virtualenv (`make install`) and the
# CUDA build of CTranslate2 that the ctranslate2 wheel ships; builds the Transformer-base
# benchmark model into .cache/models/ on first use. PYTHON=... runs it with another
# interpreter that has the runtime set (a GPU machine's own Python with the wheels that
# bench/gpu_bundle.sh packs, say) instead of the project's virtualenv.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${PYTHON:-}" ]; then
  [ -x .venv/bin/python ] || make install
  PYTHON=.venv/bin/python
fi
"$PYTHON" -m bench.throughput --name gpu --device cuda \
  --batch-tokens 16384 --web-processes 8 --concurrency 128 \
  --docs 2000 --big 20000 --naive 200 --latency-samples 30 --rss-segments 200000 "$@"
if [ "$#" -eq 0 ]; then
  # many small jobs queued first, then one worker: the worker's own feed of the GPU
  "$PYTHON" -m bench.drain --name gpu-drain --base --device cuda \
    --batch-tokens 16384 --concurrency 128 --jobs 2000 --repeat 3
fi
