#!/usr/bin/env bash
# Here, before a device call: the wheels the bare GPU machine lacks (moshi; the live server's web stack and Opus), and the shared LM fixture, into .device/
# (ignored by git; carried with `carry: [".device"]`). Prints the carry's size: it must stay under 64 MiB.
# DEVICE_PYTHON=3.11 makes wheels for a local bare rehearsal on this machine's Python (the GPU machine has 3.12).
set -euo pipefail
cd "$(dirname "$0")/../.."
rm -rf .device && mkdir -p .device/whl .device/data
python3 -m pip download -q --no-deps --only-binary=:all: --python-version "${DEVICE_PYTHON:-3.12}" --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  -d .device/whl moshi==0.2.13 "huggingface-hub<1" "safetensors<0.8" pytest-asyncio \
  starlette==1.10.0 uvicorn==0.54.0 websockets==17.4 anyio==4.16.0 h11==0.16.0 sniffio==1.3.1 click==8.5.1 \
  "sphn>=0.2,<0.3" soundfile==0.14.0 cffi==2.1.1 pycparser==3.12 prometheus_client==0.26.0 idna==3.20 \
  "typing_extensions>=4.12" soxr==1.1.0 fastapi==0.165.0 pydantic==2.14.4 pydantic_core==2.50.5 \
  typing-inspection==0.4.5 annotated-types annotated-doc opentelemetry-api importlib-metadata zipp py-spy==0.4.3 \
  psutil==7.2.2 uvloop==0.23.0
cp -r "${KAME_SHARED_DATA:-../shared/data}/kame_lm_fixture" .device/data/
du -sh .device
test "$(du -sm .device | cut -f1)" -lt 64 || { echo "the carry is over 64 MiB" >&2; exit 1; }
