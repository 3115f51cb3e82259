#!/usr/bin/env bash
# Interop check, both ways, between 3dstape's JOSE/EMV code and Python's jwcrypto + cryptography:
#   1. Python makes fresh vectors; the Swift tests that read them (TapJOSETests, TapEMVTests) run against them.
#   2. 3dstape (TapInteropVectors) makes vectors; Python verifies and decrypts every one.
# Needs python3 with pip (PyPI); installs jwcrypto and cryptography into tools/interop/.venv.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
venv="$here/.venv"
out="$here/out"
mkdir -p "$out"
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check jwcrypto cryptography
fi
py="$venv/bin/python"

echo "== Python -> Swift: fresh vectors from jwcrypto/cryptography, read by the Swift tests"
"$py" "$here/jose_interop.py" make "$out/python-vectors.json"
# Run the vector-reading suites against the fresh file, leaving the checked-in fixture untouched.
fixture="$root/Tests/TapJOSETests/Fixtures/python-vectors.json"
cp "$fixture" "$out/python-vectors.checked-in.json"
trap 'cp "$out/python-vectors.checked-in.json" "$fixture"' EXIT
cp "$out/python-vectors.json" "$fixture"
(cd "$root" && swift test --filter 'PythonInteropTests|pythonMadeChannelMessages|DecodeCommandTests' 2>&1 | tail -n 3)

echo "== Swift -> Python: vectors from 3dstape, verified by jwcrypto/cryptography"
(cd "$root" && swift build --product TapInteropVectors >/dev/null && "$(swift build --show-bin-path)/TapInteropVectors" "$out/swift-vectors.json")
"$py" "$here/jose_interop.py" check "$out/swift-vectors.json"
