# Source on the lent GPU machine from the repo root: installs the carried wheels and CAKE (no network there).
set -e
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
python3 -m pip install -q --no-deps --no-build-isolation --no-cache-dir -e . >/dev/null
export PYTHONUNBUFFERED=1 OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
set +e
