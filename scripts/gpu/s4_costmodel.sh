# H200, issue 17 item 3 (a cost model per backend, held out by run): timing data for the fitter. ~5 minutes of
# GPU time: run from the repository root with carry [".whl"].
# costmodel_variants: the legal variants of the sm_90a kmeans assign schedules (assign_plain's param grid and
#   one-change variants on the Triton and CUDA backends; assign_pingpong and assign_pingpong_x2 on CUDA; ~220
#   Triton + ~275 CUDA, dealt into 3 runs per backend), compiled on 12 worker processes and timed one at a time
#   at B=8 N=16384 K=1024 D=128 bf16; a crash or a hang is a verdict. The guard stops handing out variants
#   230 s after the start (the ~30 s plan included) and kills what is still in flight 25 s later, so the stage
#   ends by ~260 s. Writes $RES/costdata/runs/{triton,cuda}-{0,1,2}/ (run stores: commit them as
#   results/<session>/costdata/runs/) and $RES/costdata/gpu_time_variants.json (every verdict, load and timing
#   seconds). Then on any CPU: python3 scripts/fit_cost_model.py (it picks up every results/**/costdata/runs/*).
source scripts/gpu/lib.sh
stage costmodel_variants 300 python3 scripts/gpu_time_variants.py --out $RES/costdata --runs 3 --seed 0 \
  --workers 12 --budget-s 230 --drain-s 25
cat $RES/stages.txt
