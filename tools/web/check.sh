#!/usr/bin/env bash
# Browser tests of `3dstape web`: headless Chromium and chromedriver (Debian's chromium, chromium-driver) driven by
# Selenium (PyPI, in tools/web/.venv). See check.py for what is checked. Screenshots of each view go to a temporary
# folder (printed at the end; WEB_SHOTS=DIR keeps them there).
# Usage: tools/web/check.sh [PATH-TO-3dstape]   (default .build/release/3dstape)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
here="$root/tools/web"
bin=$(realpath "${1:-$root/.build/release/3dstape}")
if [ ! -x "$here/.venv/bin/python" ] || ! "$here/.venv/bin/python" -c "import selenium" 2>/dev/null; then
  python3 -m venv "$here/.venv" && "$here/.venv/bin/pip" install -q --disable-pip-version-check selenium
fi
work=$(mktemp -d)
shots=${WEB_SHOTS:-$(mktemp -d /tmp/3dstape-web-shots.XXXXXX)}
trap 'rm -rf "$work"' EXIT
cd "$work" # the demo's keys and sessions stay out of the repository
"$here/.venv/bin/python" "$here/check.py" "$bin" "$work/sessions" "$shots"
