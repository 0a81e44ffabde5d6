# The contract gates on flash-kmeans 0.3.1's assign and update kernels (issue 3's GPU audit).
for op in assign update; do
  timeout 240 cake verify --op kmeans_$op --device cuda --all-gates --timeout 120 \
    --kernel experiments/kmeans/audit_targets.py:flash_kmeans_$op --json "$OUT/verify_flash_kmeans_$op.json" \
    2>&1 | tee "$OUT/verify_flash_kmeans_$op.log"
done
