#!/bin/sh
# Build the desktop binary from the project's virtualenv.
#   packaging/build.sh          -> dist/edge-infer            (one file)
#   packaging/build.sh --onedir -> dist/edge-infer/edge-infer (one folder, faster start)
set -eu
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
$PY -m pip install --quiet "pyinstaller>=6.5"
if [ "${1:-}" = "--onedir" ]; then
    export EDGE_INFER_ONEDIR=1
    rm -rf dist/onedir/edge-infer
    DIST=dist/onedir
else
    DIST=dist
fi
$PY -m PyInstaller --noconfirm --clean --log-level WARN --distpath "$DIST" --workpath build/pyinstaller \
    packaging/edge-infer.spec
echo "built: $(ls -d "$DIST"/edge-infer)"
