# H200, session 20: seed 8's evolved best, with its register split moved (producer 40, consumers 232), and with
# `hold_operand` too. First: cp results/h200-2026-12-04/s20/evolve/evolve_seed8/best.cake experiments/kmeans/_s20_evolved8.cake
# and cp results/h200-2026-12-04/s20/hold8/evolved8_hold.cake experiments/kmeans/_s20_evolved8_hold.cake. carry [".whl"]
source scripts/gpu/lib.sh
stage variants 420 python3 scripts/gpu_assign_variants.py --out "$RES/variants" --rounds 3 --variants \
  _s20_evolved8.cake _s20_evolved8.cake:PRODUCER_REGS=40,CONSUMER_REGS=232 _s20_evolved8_hold.cake:PRODUCER_REGS=40,CONSUMER_REGS=232
pack
