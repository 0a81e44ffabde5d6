# Collects what a background pipeline on the lent machine has written so far. A call's command may run at most
# 10 minutes; a pipeline longer than that runs as its own process session (setsid, started by the first call) and
# each later call runs this: wait until RES_DIR/DONE exists or SECONDS have passed, then pack RES_DIR (and the
# pipeline's log) into $OUT/results.tgz. A fresh machine (the pipeline gone with the last one) says so. Start such a
# pipeline with PRIVATE_COPY=1 (scripts/gpu/private_copy.sh): each call re-copies the tree it was started from.
#   bash scripts/gpu/poll.sh RES_DIR SECONDS [LOG]
res=${1:?RES_DIR}; seconds=${2:?SECONDS}; log=${3:-}
end=$(( $(date +%s) + seconds ))
# A pipeline just started creates RES_DIR only after setup.sh has installed the wheels: wait up to 90 s for it.
for _ in $(seq 18); do [ -d "$res" ] && break; sleep 5; done
[ -d "$res" ] || { echo "no $res on this machine: the pipeline is not running here (a fresh machine?)"; exit 3; }
while [ ! -f "$res/DONE" ] && [ "$(date +%s)" -lt "$end" ]; do sleep 5; done
[ -n "$log" ] && [ -f "$log" ] && cp "$log" "$res/pipeline.log"
tar czf "${OUT:?}/results.tgz" -C "$res" .
cat "$res/stages.txt" 2>/dev/null
if [ -f "$res/DONE" ]; then echo "pipeline done"; else echo "pipeline still running"; fi
