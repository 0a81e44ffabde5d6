# H200 (issue 17 item 3: a cost model per backend), carry [".whl"]; one 200 s budget. Why: every committed Triton
# timing is of codegen 1-3 (sessions 1 and 5), while the Triton backend now generates codegen 9, so the Triton backend
# has no calibration of the code it emits and no held-out figure for it (`scripts/fit_cost_model.py` keys timings by
# codegen version and clock). This times the legal Triton variants of the shipped sm_90a assign schedules (148/147/147
# dealt into three runs, as `--dry-run` plans them on a CPU) as CUDA-graph replays at B=8 N=16384 K=1024 D=128 bf16:
# kernel-only device time, the clock of the CUDA graph key that meets the goal (rho 0.919, top-5 0.80 over 176).
#   RES=/tmp/res OUT=/tmp/o PRIVATE_COPY=1 setsid nohup bash scripts/gpu/s26_triton_cost.sh > /tmp/s26.log 2>&1 < /dev/null &
#   then bash scripts/gpu/poll.sh /tmp/res 240 /tmp/s26.log until it says done.
# Look for the verdict table in triton_graph.log: ~300+ "timed" over triton-0..2 (session 5: 171 Triton timed beside
# CUDA in 216 s). Afterwards, on a CPU: commit $RES/triton_cost under results/h200-<date>/<session>/ and run
#   python3 scripts/fit_cost_model.py --write   (the runs are found by default; key triton/H200/...+codegen-9+graph)
# and record the held-out figure and its split-half ceiling in RESULTS.md.
source scripts/gpu/lib.sh
budget "${S26_BUDGET:-200}"
budgeted triton_graph 190 60 python3 scripts/gpu_time_variants.py --out "$RES/triton_cost/costdata" --backend triton \
  --clock graph --runs 3 --workers 12 --budget-s 150 --drain-s 15
touch $RES/DONE
pack
cat $RES/stages.txt
