# Build FlashKDA (MoonshotAI/FlashKDA at the commit experiments/kda/flashkda_source.json names) from the sources
# carried in .flashkda/ into a wheel on the GPU machine, install it into /tmp/site (on PYTHONPATH once
# scripts/gpu/setup.sh ran) and copy the wheel to $OUT. Run from the repository root as a stage of a GPU script:
#
#     bash scripts/gpu/flashkda_build.sh
#
# A wheel carried in .flashkda/dist/ (the one an earlier call returned in $OUT, moved there by hand) is installed
# instead of compiling, and the log says so; remove .flashkda/dist/ to rebuild. The build is upstream's setup.py
# (torch.utils.cpp_extension, ninja) with FLASH_KDA_CUDA_ARCHS=90a, MAX_JOBS=16 and nvcc --split-compile=0, run
# on a copy under /tmp so that nothing is written into the carried folder and setup.py's `git submodule update`
# finds no repository.
# Exit status: 0 installed and importable; 3 the sources are missing; anything else the build's or import's own.
set -euo pipefail
SRC=${FLASHKDA_SRC:-.flashkda}  # tests point it elsewhere
SOURCE_JSON=experiments/kda/flashkda_source.json
BUILD=/tmp/flashkda-build
WHEELS=/tmp/flashkda-wheel
SITE=${FLASHKDA_SITE:-/tmp/site}  # where scripts/gpu/setup.sh put the carried wheels (on PYTHONPATH)

for need in setup.py flash_kda/__init__.py csrc/flash_kda.cpp csrc/smxx/fwd_launch.cu cutlass/include/cute/tensor.hpp \
            cutlass/tools/util/include/cutlass/util/device_memory.h; do
  if [ ! -f "$SRC/$need" ]; then
    echo "flashkda_build: $SRC/$need is missing: fill $SRC/ as $SOURCE_JSON's rebuild_the_folder says and carry it" >&2
    exit 3
  fi
done
COMMIT=$(python3 -c "import json; print(json.load(open('$SOURCE_JSON'))['commit'])")

shopt -s nullglob
carried=("$SRC"/dist/flash_kda-*.whl)
if [ ${#carried[@]} -gt 1 ]; then
  echo "flashkda_build: several wheels in $SRC/dist/ (${carried[*]}): keep one" >&2
  exit 3
fi
if [ ${#carried[@]} -eq 1 ]; then
  WHEEL=${carried[0]}
  echo "flashkda_build: installing the carried wheel $WHEEL (no compile; remove $SRC/dist/ to rebuild)"
else
  export FLASH_KDA_CUDA_ARCHS=${FLASH_KDA_CUDA_ARCHS:-90a} MAX_JOBS=${MAX_JOBS:-16}
  # No local version label: a "+<commit>" would put a '+' in the wheel's name, which $OUT does not return. The
  # commit is in this log and in flashkda_source.json; git finds no repository around the copy to take one from.
  unset FLASH_KDA_VERSION_SUFFIX
  export GIT_CEILING_DIRECTORIES=/tmp
  # cicc's optimizer on every core: compile time only (the SASS was identical on the CPU machine; the fingerprint
  # printed below checks it here). NVCC_APPEND_FLAGS= (set, empty) builds with upstream's flags alone.
  export NVCC_APPEND_FLAGS=${NVCC_APPEND_FLAGS---split-compile=0}
  echo "flashkda_build: FlashKDA $COMMIT, FLASH_KDA_CUDA_ARCHS=$FLASH_KDA_CUDA_ARCHS MAX_JOBS=$MAX_JOBS" \
       "NVCC_APPEND_FLAGS=${NVCC_APPEND_FLAGS:-} nvcc: $(nvcc --version | tail -1)"
  rm -rf "$BUILD" "$WHEELS"
  mkdir -p "$BUILD"
  tar -C "$SRC" --exclude=./dist -cf - . | tar -C "$BUILD" -xf -
  started=$(date +%s)
  python3 -m pip wheel -v --no-build-isolation --no-deps --no-index -w "$WHEELS" "$BUILD"
  echo "flashkda_build: compiled in $(( $(date +%s) - started )) s"
  built=("$WHEELS"/flash_kda-*.whl)
  WHEEL=${built[0]}
  if [ -n "${OUT:-}" ]; then cp "$WHEEL" "$OUT/"; echo "flashkda_build: wheel copied to \$OUT/$(basename "$WHEEL")"; fi
fi
python3 -m pip install -q --no-deps --no-index --no-compile --no-cache-dir --upgrade --target "$SITE" "$WHEEL"
python3 -c "import flash_kda, torch; print('flashkda_build: import flash_kda OK from', flash_kda.__file__, 'torch', torch.__version__)"
if command -v cuobjdump > /dev/null; then
  so=("$SITE"/flash_kda_C*.so)
  got=$(cuobjdump -sass "${so[0]}" | grep -v '^identifier = ' | md5sum | cut -d' ' -f1)
  want=$(python3 -c "import json; print(json.load(open('$SOURCE_JSON'))['sass_fingerprint']['md5'])")
  verdict=$([ "$got" = "$want" ] && echo "the same machine code" || echo "differs (nvcc's or cuobjdump's version, or the flags)")
  echo "flashkda_build: SASS fingerprint $got; the CPU machine's build $want: $verdict"
fi
