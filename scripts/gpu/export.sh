# H200: issue 15 — `cake export` of the ping-pong assign (CUDA, sm_90a) and what it must show (≤ 3 minutes).
#   host time per call before/after, CUDA-graph capture + replay, the exported op and CAKE's callable timed
#   interleaved at the cell next to `cake bench` of the schedule, certify (bf16 and fp16: the kernel's dtypes).
source scripts/gpu/lib.sh
EXP=/tmp/export_cuda
rm -rf $EXP
stage export 60 cake export experiments/kmeans/assign_pingpong.cake --backend cuda --arch sm_90a \
  --static D=8,128 --name cake_kmeans_cuda -o $EXP
stage install 40 python3 -m pip install -q --no-deps --no-build-isolation --no-index --target /tmp/export_site $EXP
stage host_graph_cell 90 python3 scripts/gpu_export.py --package $EXP --out $RES
stage bench_schedule 90 env CAKE_BACKEND=cuda cake bench --schedule experiments/kmeans/assign_pingpong.cake \
  --shapes cake_cell --reps 50 --max-seconds 15 --json $RES/bench_schedule.json
stage certify 100 cake certify $EXP --device cuda --dtypes bf16 fp16
cp $EXP/cake_kmeans_cuda/certificate.json $RES/certificate.json; pack
cat $RES/stages.txt
