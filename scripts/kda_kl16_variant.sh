# Writes the kl16 variant of a staged-family KDA schedule (kda_fused_staged.cake, kda_fused_varlen.cake) to stdout:
# the decayed keys kl = k e^(glast - gc) stored in the input dtype E (fla's chunk_kda stores its `kg` in k's dtype)
# instead of fp32, and recur's state update one 16-bit product `mma(vnT, kl) via dot` instead of a TF32 product of
# vn cast to fp32. Half kls's bytes (402 MB written and read at h96_fixed); a rounding the contract's chunked control
# does not make (it keeps kl fp32), so only the gates can admit it.
#   bash scripts/kda_kl16_variant.sh SCHEDULE.cake > VARIANT.cake
set -euo pipefail
src=${1:?a staged-family schedule}
out=$(sed -E \
  -e 's/^(scratch kls: )f32\[/\1E[/' \
  -e 's/store kc \* exp\(glast\[None, :\] - gc\) -> kls\[/store cast(kc * exp(glast[None, :] - gc), E) -> kls[/' \
  -e 's/let kl: f32\[C, K\] = load kls\[/let kl: E[C, K] = load kls[/' \
  -e 's/mma\(cast\(vnT, f32\), kl\) via dot\.tf32/mma(vnT, kl) via dot/' \
  -e 's/^schedule (\w+) implements/schedule \1_kl16 implements/' "$src")
# every substitution must have taken: a schedule whose lines drifted is an error, not a silent copy
for want in 'scratch kls: E\[' 'store cast\(kc \* exp\(glast' 'let kl: E\[C, K\]' 'mma\(vnT, kl\) via dot$' '_kl16 implements'; do
  grep -Eq "$want" <<<"$out" || { echo "kda_kl16_variant: \`$want\` did not take in $src" >&2; exit 2; }
done
printf '%s\n' "$out"
