#!/usr/bin/env bash
# The throughput table of bench/throughput.py on a GPU: one command, under 8 minutes
# (about 90 s on an NVIDIA H200, the model's build
# included). Needs the project's virtualenv (`make install`) and the CUDA build of
# CTranslate2 that the ctranslate2 wheel ships; builds the Transformer-base benchmark
# model into .cache/models/ on first use. PYTHON=... runs it with another interpreter
# that has the runtime set (a GPU machine's own Python with the wheels that
# bench/gpu_bundle.sh packs, say) instead of the project's virtualenv.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${PYTHON:-}" ]; then
  [ -x .venv/bin/python ] || make install
  PYTHON=.venv/bin/python
fi
exec "$PYTHON" -m bench.throughput --name gpu --device cuda \
  --batch-tokens 16384 --web-processes 8 --concurrency 128 \
  --docs 200 --big 20000 --naive 200 --latency-samples 30 --rss-segments 200000 "$@"
