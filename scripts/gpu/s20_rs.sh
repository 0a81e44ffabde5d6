# H200, session 20 (issue 17): does holding the point tile in registers (wgmma with A from registers) move the
# ping-pong assign at the cell? Variants, 3 processes each, interleaved, each gated (bf16 battery) then timed
# against flash-kmeans in the same process (gpu_assign_variants.py):
#   assign_pingpong.cake          the hand-written ping-pong (both wgmma operands from shared memory)
#   assign_pingpong_rs.cake       + the point tile held in registers (`let xa = xs[w]`), released after the k loop
#   assign_pingpong_rs_early.cake + released right after it is read (made below; failed CMP-01 at STAGES 4 when run)
#   assign_pingpong_rs_early.cake at STAGES 3, BN 64 BK 128, BN 64 BK 256 STAGES 2
# As run in session 20 the committed assign_pingpong_rs.cake was the early-release version and the late one was
# made by this script; results/h200-2026-12-04/s20/rs-variants/variants/ keeps the specialized files as timed.
#   bash scripts/gpu/s20_rs.sh        (about 4 minutes; carry [".whl"])
source scripts/gpu/lib.sh
python3 - > experiments/kmeans/assign_pingpong_rs_early.cake <<'PY'
from pathlib import Path
rs = Path("experiments/kmeans/assign_pingpong_rs.cake").read_text()
early = rs.replace("    let xa: T[BN, D] = xs[w]\n", "    let xa: T[BN, D] = xs[w]\n    arrive x_empty[w]\n", 1)
early = early.replace("    }\n    arrive x_empty[w]\n    store besti", "    }\n    store besti", 1)
early = early.replace("schedule assign_pingpong_rs ", "schedule assign_pingpong_rs_early ", 1)
assert early.count("arrive x_empty") == 1 and early != rs
print(early, end="")
PY
stage variants 560 python3 scripts/gpu_assign_variants.py --out "$RES/variants" --rounds 3 --variants \
  assign_pingpong.cake assign_pingpong_rs.cake assign_pingpong_rs_early.cake assign_pingpong_rs_early.cake:STAGES=3 \
  assign_pingpong_rs_early.cake:BN=64,BK=128,STAGES=4 assign_pingpong_rs_early.cake:BN=64,BK=256,STAGES=2
rm -f experiments/kmeans/assign_pingpong_rs_early.cake
touch $RES/DONE
pack
cat $RES/stages.txt
