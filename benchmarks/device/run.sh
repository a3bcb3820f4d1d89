#!/usr/bin/env bash
# On the device machine, as one command (the device tool's `run`, carrying .device): install the carried wheels
# beside the machine's own torch, then the whole check (benchmarks/device/check.py), its JSON under $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .device/whl/*.whl \
  || { echo "could not install the carried wheels" >&2; exit 2; }
export PYTHONPATH="/tmp/site:$PWD" HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1 KAME_SHARED_DATA="$PWD/.device/data"
exec python3 -m benchmarks.device.check --device cuda --out "${OUT:?the device tool sets OUT}" "$@"
