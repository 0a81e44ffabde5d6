# Sourced by the GPU session scripts: installs the carried wheels and CAKE (setup.sh), then defines `stage`.
# `stage NAME LIMIT CMD...` runs CMD under a time limit, logs to $RES/NAME.log, appends "stage NAME rc=..
# Ns" to $RES/stages.txt, and packs $RES into $OUT/results.tgz, so a stage that runs out of time loses only
# itself. Scripts run as files (`python3 scripts/NAME.py`); nothing in scripts/ shadows a library.
source scripts/gpu/setup.sh
RES=${RES:-/tmp/res}; mkdir -p "$RES"
pack() { tar czf "$OUT/results.tgz" -C "$RES" . ; }
# A stage named in $SKIP_STAGES (space-separated) is recorded as skipped and not run.
stage() { local name=$1 limit=$2; shift 2; local t0; t0=$(date +%s)
  case " ${SKIP_STAGES:-} " in *" $name "*) echo "stage $name skipped" | tee -a "$RES/stages.txt"; return 0;; esac
  timeout -k 5 "$limit" "$@" > "$RES/$name.log" 2>&1; local rc=$?
  echo "stage $name rc=$rc $(( $(date +%s) - t0 ))s" | tee -a "$RES/stages.txt"; tail -n 25 "$RES/$name.log"; pack; }
{ nvidia-smi --query-gpu=name,driver_version --format=csv; python3 -c "import torch,triton;print(torch.__version__,triton.__version__)"; } > "$RES/env.txt"
# A shared time budget for a file's stages: `budget SECONDS` starts it; `budgeted NAME CAP MIN CMD...` runs a stage
# limited to the smaller of CAP and what is left, or records it as skipped when less than MIN seconds are left (a
# spent budget never reaches `stage`: `timeout 0` would mean no limit at all).
budget() { BUDGET_S=$1; BUDGET_END=$(( $(date +%s) + $1 )); }
budgeted() { local name=$1 cap=$2 min=$3; shift 3; local rest=$(( BUDGET_END - $(date +%s) ))
  if [ "$rest" -lt "$min" ]; then echo "stage $name skipped: ${rest}s left of $BUDGET_S" | tee -a "$RES/stages.txt"; return 0; fi
  stage "$name" $(( rest < cap ? rest : cap )) "$@"; }
