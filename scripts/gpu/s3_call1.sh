# H200 session 3, call 1 (issues 16 and 15): the hand-written Triton sweep and the headlines over >= 3
# processes (s3_numbers.sh), then `cake export` of the ping-pong and what the export must show (export.sh,
# less its `cake bench` stage: the headlines time the same schedule at the cell).
bash scripts/gpu/s3_numbers.sh
SKIP_STAGES=bench_schedule bash scripts/gpu/export.sh
