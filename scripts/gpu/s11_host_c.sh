# H200 session 11, the two host-time calls run on the evolve's machine start (issue 15), carry [".whl"]; about 2 minutes.
# Session 11 ran these two steps inline, as two calls; this file is them, in order, for a reproduction.
# 1. the exported two-launch op (assign_pingpong.cake) timed by gpu_host_overhead.py in 5 processes;
# 2. the one-launch op (assign_pingpong_prodnorm.cake) and the two-launch one alternating, 3 processes each.
# Look for the "across runs" lines of host_summary_two_c.log, host_summary_one_c2.log and host_summary_two_c2.log.
source scripts/gpu/lib.sh
budget 350
export CAKE_EXPORT_CACHE=/tmp/s11_launcher
mkdir -p $RES/host_two_c
cake export experiments/kmeans/assign_pingpong.cake --backend cuda --arch sm_90a --static D=128 --name cake_s11_two \
  -o /tmp/s11_two_c > $RES/export_c.log 2>&1
python3 -c "from cake.export.runtime import _launcher; print(_launcher.build())" >> $RES/export_c.log 2>&1
for i in 1 2 3 4 5; do
  budgeted host_two_c_$i 12 8 env CAKE_EXPORT_HOST_PATH=cpp python3 scripts/gpu_host_overhead.py \
    --package /tmp/s11_two_c --label two_c_$i --out $RES/host_two_c
done
python3 scripts/gpu_host_overhead.py --summarize $RES/host_two_c/host_two_c_*.json --out $RES/host_two_c \
  | tee $RES/host_summary_two_c.log
cake export experiments/kmeans/assign_pingpong_prodnorm.cake --backend cuda --arch sm_90a --static D=128 \
  --name cake_s11_one -o /tmp/s11_one_c > $RES/export_one_c.log 2>&1
for i in 1 2 3; do
  for k in one two; do
    budgeted host_${k}_c2_$i 12 8 env CAKE_EXPORT_HOST_PATH=cpp python3 scripts/gpu_host_overhead.py \
      --package /tmp/s11_${k}_c --label ${k}_c2_$i --out $RES/host_${k}_c2
  done
done
for k in one two; do
  python3 scripts/gpu_host_overhead.py --summarize $RES/host_${k}_c2/host_${k}_c2_*.json --out $RES/host_${k}_c2 \
    | tee $RES/host_summary_${k}_c2.log
done
pack
cat $RES/stages.txt
