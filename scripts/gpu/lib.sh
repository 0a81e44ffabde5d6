# Sourced by the GPU session scripts: installs the carried wheels and CAKE (setup.sh), then defines `stage`.
# `stage NAME LIMIT CMD...` runs CMD under a time limit, logs to $RES/NAME.log, appends "stage NAME rc=..
# Ns" to $RES/stages.txt, and packs $RES into $OUT/results.tgz, so a stage that runs out of time loses only
# itself. Scripts run as files (`python3 scripts/NAME.py`); nothing in scripts/ shadows a library.
source scripts/gpu/private_copy.sh
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
# `budget_left` prints the seconds left, less BUDGET_RESERVE (seconds a script keeps for its later stages; default 0).
# With BUDGET_DEADLINE (epoch seconds, from the caller's clock: when its lease runs out, less a margin) the budget also
# ends there, so a machine that took long to start still gets its last stages done inside the lease; a deadline
# already past or further off than the budget (clocks that disagree) is reported and ignored.
budget() { BUDGET_S=$1; BUDGET_END=$(( $(date +%s) + $1 ))
  if [ -n "${BUDGET_DEADLINE:-}" ]; then local ahead=$(( BUDGET_DEADLINE - $(date +%s) ))
    if [ "$ahead" -gt 0 ] && [ "$ahead" -le "$1" ]; then BUDGET_S=$ahead; BUDGET_END=$BUDGET_DEADLINE
    elif [ "$ahead" -le 0 ]; then echo "BUDGET_DEADLINE ${ahead}s away: ignored (clocks disagree?)" | tee -a "$RES/stages.txt"; fi
    echo "budget ${BUDGET_S}s (deadline ${ahead}s away, cap $1 s)" | tee -a "$RES/stages.txt"; fi; }
budget_left() { echo $(( BUDGET_END - $(date +%s) - ${BUDGET_RESERVE:-0} )); }
budgeted() { local name=$1 cap=$2 min=$3; shift 3; local rest; rest=$(budget_left)
  if [ "$rest" -lt "$min" ]; then echo "stage $name skipped: ${rest}s left of $BUDGET_S" | tee -a "$RES/stages.txt"; return 0; fi
  stage "$name" $(( rest < cap ? rest : cap )) "$@"; }
# `export_evidence ONE TAG RUNS`: issue 15's evidence for exporting schedule ONE, inside the current budget — the
# exported op's host time per call (C++ path) in RUNS processes and their summary, the package at D = 8 and 128
# against CAKE's own callable with graph capture and replay (gpu_export.py), `cake certify` in bf16 and fp16, and
# `cake bench` at the cell with every baseline. TAG names the temporary folders and the host package (cake_TAG_host).
export_evidence() { local one=$1 tag=$2 runs=$3 i; local host=/tmp/${tag}_host pkg=/tmp/${tag}_export summaries=()
  rm -rf "$host" "$pkg"; mkdir -p "$RES/host" "$RES/export"
  export CAKE_EXPORT_CACHE=/tmp/${tag}_launcher
  budgeted host_export 15 10 cake export "$one" --backend cuda --arch sm_90a --static D=128 --name "cake_${tag}_host" \
    -o "$host"
  budgeted host_build_launcher 25 20 python3 -c "from cake.export.runtime import _launcher; print(_launcher.build())"
  for i in $(seq 1 "$runs"); do
    budgeted host_cpp_$i 10 8 env CAKE_EXPORT_HOST_PATH=cpp python3 scripts/gpu_host_overhead.py --package "$host" \
      --label cpp_$i --out "$RES/host"
    summaries+=("$RES/host/host_cpp_$i.json")
  done
  budgeted host_summary 14 8 python3 scripts/gpu_host_overhead.py --summarize "${summaries[@]}" --out "$RES/host"
  budgeted export 60 30 cake export "$one" --backend cuda --arch sm_90a --static D=8,128 --name cake_kmeans_one -o "$pkg"
  budgeted export_graph_cell 90 40 python3 scripts/gpu_export.py --package "$pkg" --schedule "$one" --out "$RES/export"
  budgeted certify 100 50 cake certify "$pkg" --device cuda --dtypes bf16 fp16
  cp "$pkg/cake_kmeans_one/certificate.json" "$RES/export/certificate.json" 2>/dev/null; pack
  budgeted bench_cell 60 30 env CAKE_BACKEND=cuda cake bench --schedule "$one" --shapes cake_cell --reps 50 \
    --max-seconds 15 --json "$RES/export/bench_schedule.json"; }
# `kda_bench_processes LATER_CAP MIN ARGS...`: gpu_kda_bench.py at the six FlashKDA shapes (its default) in three
# processes, bench_1..3 (the first <= KDA_BENCH_FIRST_CAP s, default 450: fla autotunes each shape there,
# TRITON_CACHE_AUTOTUNING keeps it for the next two, <= LATER_CAP s each; each skipped with less than MIN s left), ARGS naming the schedules and their verdicts;
# then the summary: per schedule the median over the processes per shape with its range, and the geomean.
kda_bench_processes() { local later=$1 min=$2 i; shift 2
  for i in 1 2 3; do
    budgeted bench_$i "$([ $i = 1 ] && echo "${KDA_BENCH_FIRST_CAP:-450}" || echo "$later")" "$min" python3 scripts/gpu_kda_bench.py \
      --json "$RES/bench_$i.json" "$@" --max-seconds 110
  done
  budgeted summary 10 2 python3 scripts/kda_bench_summary.py "$RES/bench_1.json" "$RES/bench_2.json" \
    "$RES/bench_3.json" --json "$RES/summary.json"; }
# `kda_gpu_evolve CAP MIN WALL`: issue 14's `cake evolve --op kda` on the GPU from the workload's seeds (Triton, seed 0,
# two evaluations a turn, fitness measured over fla chunk_kda at every fitness shape) with WALL seconds of wall time,
# as stage kda_evolve (<= CAP s, skipped with less than MIN s left), then `cake report` on its run.
kda_gpu_evolve() { local cap=$1 min=$2 wall=$3
  budgeted kda_evolve "$cap" "$min" cake evolve --op kda --device cuda --backend triton --seed 0 --evals-per-turn 2 \
    --against fla_chunk_kda --wall-time "$wall" --out "$RES/kda_evolve"
  budgeted report 30 5 cake report "$RES/kda_evolve"; }
# `kmeans_evolve_seeds SEED...`: issue 17's clean-start kmeans evolve per seed (`gpu_evolve.py --minutes 10 --backend
# cuda --evals-per-turn 4`, 8.5 minutes of turns: the loop starts no evaluation past its budget less the slack for the one
# in flight; EVOLVE_SECONDS, default 600, sets another wall, cut to what the budget has left so that a seed ends on its
# own clock and reports, never under the stage's kill), as stages evolve_seedN (skipped with less than
# EVOLVE_MIN_SECONDS, default 420, left). With EVOLVE_SHARE set, each seed's wall is also cut to an even share of what
# the budget has left among the seeds still to run, as many of them as can have EVOLVE_MIN_SECONDS each (the last
# ones are skipped), so what one seed leaves unused goes to the next. Then
# their best-so-far curves
# (evolve_seeds.py). Sets EVOLVED_BESTS to the best.cake of every seed that produced one. EVOLVE_ARGS (an array, may be
# unset) adds gpu_evolve.py arguments to every seed (e.g. --disable-operator NAME).
kmeans_evolve_seeds() { local seed runs=() wall fit left=$#; EVOLVED_BESTS=()
  for seed in "$@"; do
    wall=$(budget_left)
    if [ -n "${EVOLVE_SHARE:-}" ]; then  # shared among the seeds still to run that can have their minimum each
      fit=$(( wall / ${EVOLVE_MIN_SECONDS:-420} )); [ "$fit" -gt "$left" ] && fit=$left
      [ "$fit" -lt 1 ] && { echo "stage evolve_seed$seed skipped: ${wall}s left" | tee -a "$RES/stages.txt"; continue; }
      wall=$(( wall / fit )); left=$(( left - 1 )); fi
    [ "$wall" -gt "${EVOLVE_SECONDS:-600}" ] && wall=${EVOLVE_SECONDS:-600}
    budgeted evolve_seed$seed "$wall" "${EVOLVE_MIN_SECONDS:-420}" python3 scripts/gpu_evolve.py --minutes "$(awk "BEGIN{print $wall/60}")" \
      --backend cuda --evals-per-turn 4 \
      --seed "$seed" --out "$RES/evolve_seed$seed" "${EVOLVE_ARGS[@]}"
    [ -f "$RES/evolve_seed$seed/gpu_evolve.json" ] && runs+=("$RES/evolve_seed$seed/gpu_evolve.json")
    [ -f "$RES/evolve_seed$seed/best.cake" ] && EVOLVED_BESTS+=("$RES/evolve_seed$seed/best.cake")
  done
  [ ${#runs[@]} -gt 0 ] && budgeted seeds 20 5 python3 scripts/evolve_seeds.py "${runs[@]}" --json "$RES/evolve_seeds.json"
  return 0; }
# `server_or_one_shot`: the bench server's smoke (stage server_smoke, <= 150 s); sets EVOLVE_ARGS to run the evolve seeds
# in one-shot bench processes (`--no-reuse-bench-process`) unless it passed. (Its three evaluations took 92 s on session
# 29's H100, a slower host than session 27's: the cap of 100 killed it just after it had written its verdict.)
server_or_one_shot() { EVOLVE_ARGS=()
  budgeted server_smoke 150 60 python3 scripts/gpu_bench_server_smoke.py --out "$RES/server"
  python3 -c "import json, sys; sys.exit(0 if json.load(open('$RES/server/bench_server_smoke.json'))['ok'] else 1)" \
    2>/dev/null || { EVOLVE_ARGS+=(--no-reuse-bench-process); echo "seeds run with one-shot bench processes" | tee -a "$RES/stages.txt"; }; }
# `bests_vs_hand CAP MIN [VARIANT...]`: every evolved best (EVOLVED_BESTS) and any VARIANT beside the hand-written
# ping-pong (issue 17's target), it held, it held with its merge deferred, and triton_assign, two bench processes each
# (stage bests_vs_hand).
bests_vs_hand() { local cap=$1 min=$2; shift 2
  budgeted bests_vs_hand "$cap" "$min" python3 scripts/gpu_assign_variants.py --out "$RES/vs" --rounds 2 \
  --also triton_assign --variants "${EVOLVED_BESTS[@]}" "$@" assign_pingpong.cake assign_pingpong_rs.cake \
  assign_pingpong_rs_defer.cake; }
# `unfused_copies BEST...`: prints, for every BEST whose last move fused a launch (a top-level `fuse` line), the path of
# a copy without that line written beside it (NAME_unfused.cake): the pair says what the fusion costs or saves.
unfused_copies() { local best copy
  for best in "$@"; do grep -q '^fuse ' "$best" || continue
    copy=${best%.cake}_unfused.cake; grep -v '^fuse ' "$best" > "$copy"; echo "$copy"; done; }
