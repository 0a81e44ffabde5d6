source scripts/gpu/lib.sh
stage vec_variants 75 python3 scripts/gpu_assign_variants.py --out $RES/vec_variants --rounds 1 --variants assign_pingpong.cake assign_pingpong_prodnorm.cake
stage vec_verify 45 cake verify --schedule experiments/kmeans/assign_pingpong_prodnorm.cake --backend cuda --device cuda --dtypes bf16 --seeds 0 --json $RES/vec_verify.json
