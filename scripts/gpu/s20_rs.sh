# H200, session 20 (issue 17): the point tile held in registers (wgmma with A from registers). Variants, 3 processes
# each, interleaved, each gated (bf16 battery) then timed against flash-kmeans in the same process
# (gpu_assign_variants.py):
#   assign_pingpong.cake          the hand-written ping-pong (both wgmma operands from shared memory)
#   assign_pingpong_rs.cake       + `let xa = xs[w]` before the k loop, the point stage released right after it (the
#                                 backend fences the ldmatrix reads before that release), at STAGES 4 and 3
#   assign_pingpong_rs_late.cake  + released after the k loop instead (made below)
# As first run in session 20 the backend emitted no fence: the early release then failed CMP-01 at STAGES 4
# (results/h200-2026-12-04/s20/rs-variants/); with the fence it passed (.../s20/fence/).
#   bash scripts/gpu/s20_rs.sh        (about 4 minutes; carry [".whl"])
source scripts/gpu/lib.sh
python3 - > experiments/kmeans/assign_pingpong_rs_late.cake <<'PY'
from pathlib import Path
rs = Path("experiments/kmeans/assign_pingpong_rs.cake").read_text()
late = rs.replace("    let xa: T[BN, D] = xs[w]\n    arrive x_empty[w]\n", "    let xa: T[BN, D] = xs[w]\n", 1)
late = late.replace("    }\n    store besti", "    }\n    arrive x_empty[w]\n    store besti", 1)
late = late.replace("schedule assign_pingpong_rs ", "schedule assign_pingpong_rs_late ", 1)
assert late.count("arrive x_empty") == 1 and late != rs
print(late, end="")
PY
stage variants 560 python3 scripts/gpu_assign_variants.py --out "$RES/variants" --rounds 3 --variants \
  assign_pingpong.cake assign_pingpong_rs.cake assign_pingpong_rs.cake:STAGES=3 assign_pingpong_rs_late.cake
rm -f experiments/kmeans/assign_pingpong_rs_late.cake
touch $RES/DONE
pack
cat $RES/stages.txt
