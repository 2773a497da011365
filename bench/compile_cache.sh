#!/usr/bin/env bash
# The persistent compilation cache, before and after: wall times of whole
# `python -m c4jax.train` commands (a new run of one iteration, and a resume for one
# more) without the cache (C4JAX_COMPILE_CACHE=0) and with it, in a fresh cache folder.
#
#   bash bench/compile_cache.sh [PRESET]     # default: cpu; run from the repository root
set -euo pipefail
preset=${1:-cpu}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
unset JAX_COMPILATION_CACHE_DIR
export XDG_CACHE_HOME="$work/cache"
common=(--config "$preset" --no-progress --eval.every 0)
timed() {  # timed CACHE WHAT ARGS...: one command's wall time
    local cache=$1 what=$2; shift 2
    local start end
    start=$(date +%s.%N)
    C4JAX_COMPILE_CACHE=$cache python -m c4jax.train "${common[@]}" "$@" >"$work/log" 2>&1
    end=$(date +%s.%N)
    printf '%-34s cache %s  %6.1f s\n' "$what" "$cache" "$(echo "$end - $start" | bc)"
}
timed 0 "new run, 1 iteration" --workdir "$work/a" --train.num-iterations 1
timed 1 "new run, 1 iteration (fills it)" --workdir "$work/b" --train.num-iterations 1
timed 0 "resume for 1 more iteration" --workdir "$work/a" --train.num-iterations 2
timed 1 "resume for 1 more iteration" --workdir "$work/b" --train.num-iterations 2
timed 1 "new run, 1 iteration" --workdir "$work/c" --train.num-iterations 1
timed 0 "new run, 1 iteration" --workdir "$work/d" --train.num-iterations 1
echo "cache: $(du -sh "$XDG_CACHE_HOME/c4jax/jax" | cut -f1); $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores, jax $(python -c 'import jax; print(jax.__version__)'); load: $(cut -d' ' -f1-3 /proc/loadavg)"
