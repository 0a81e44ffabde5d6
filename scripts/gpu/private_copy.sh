# Sourced first by lib.sh. A pipeline started in the background (`setsid nohup bash scripts/gpu/X.sh &`) outlives the
# call that started it, and every later call copies the working tree into the same directory again: a file
# rewritten under a running process breaks it (session 20: the first evaluation of a GPU evolve was recorded
# failed when Triton's @jit could not read triton_assign.py's source while a poll call's copy was under way).
# With PRIVATE_COPY=1 the script re-runs itself from a copy of the tree in /tmp that no later call touches (its
# editable install then points there too); results still go to $RES and $OUT.
if [ "${PRIVATE_COPY:-}" = 1 ] && [ -z "${CAKE_PRIVATE_COPY_OF:-}" ]; then
  _copy=/tmp/cake-private-$$
  rm -rf "$_copy" && cp -a . "$_copy" || { echo "private copy to $_copy failed" >&2; exit 1; }
  export CAKE_PRIVATE_COPY_OF=$PWD
  cd "$_copy" && exec bash "$0" "$@"
fi
