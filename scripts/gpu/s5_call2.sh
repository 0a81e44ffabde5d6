# H200 session 5, call 2 (issues 14, 18, 17): where the chunk-parallel KDA seed's 67 ms go (per-launch profile
# beside fla chunk_kda, registers and spills), the counting-sort update's launches at large_n (B=1 N=1M: 0.45x of
# flash-kmeans), and a clean-start evolve seed of the assign (CUDA backend, 4.5 minutes with its report).
source scripts/gpu/lib.sh
export FLA_FLASH_KDA=0
stage kda_profile 100 python3 scripts/gpu_kda_profile.py --out $RES/kda_profile.json --shapes h96_fixed h64_varlen_1024x8
stage update_large_n 80 python3 scripts/gpu_update_sorted.py --out $RES/update_sorted_large_n --shape large_n --max-seconds 3
stage evolve_s5 300 python3 scripts/gpu_evolve.py --minutes 4.5 --backend cuda --evals-per-turn 4 --seed 1 --out $RES/evolve_s5
cat $RES/stages.txt
