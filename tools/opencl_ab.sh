#!/usr/bin/env bash
# Two OpenCL builds' speed side by side on this machine's GPU, in one command: the kernel switches
# of A and of B (TERN_OPENCL_OPTIONS) alternated round by round, so that drift in clocks and
# neighbours falls on both, then one profiled run of each for its per-kernel rows.
#
#   bash tools/opencl_ab.sh "OPTIONS_A" "OPTIONS_B" [OUT_DIR]
#   bash tools/opencl_ab.sh "" "-DATT_WARPS=1"          # a switch against the device's defaults
#
# MODELS (default: gpu_check.sh's 1B and 7B shapes, made with tern mkmodel where missing),
# PROMPTS (default "16 512": decode after 16 and after 512 prompt tokens), ROUNDS (default 3;
# A then B in odd rounds, B then A in even ones), TOKENS (default 128). Prints decode t/s per
# round and the medians with B / A, then the profiled runs' kernel rows; every output is kept in
# OUT_DIR (default ./opencl-ab). The exit status is 1 where a run failed or did not run on OpenCL.
set -u
cd "$(dirname "$0")/.."
TERN=${TERN:-build/tern}
A=${1-} B=${2-} OUT=${3:-opencl-ab}
ROUNDS=${ROUNDS:-3} TOKENS=${TOKENS:-128} PROMPTS=${PROMPTS:-16 512}
MODELS=${MODELS:-/tmp/tern-1b-q4km.gguf:llama-1b /tmp/tern-7b-q4km.gguf:llama-7b}
if [ "$#" -lt 2 ] || [ ! -x "$TERN" ]; then
    echo "usage: bash tools/opencl_ab.sh OPTIONS_A OPTIONS_B [OUT_DIR]  (needs $TERN: make)" >&2
    exit 2
fi
mkdir -p "$OUT"
bad=0
run() { # run LOG OPTIONS BENCH-ARGS...: one bench; prints its decode t/s (or "failed")
    local log=$1 opts=$2
    shift 2
    if ! TERN_OPENCL_OPTIONS="$opts" "$TERN" bench --backend opencl "$@" >"$log" 2>&1 ||
        ! grep -q "^backend: opencl" "$log"; then
        echo failed
        return 1
    fi
    # the medians table's decode column (its header names the columns: find it there)
    awk -F'|' '/^\| config \| load ms warm/ { for (i = 1; i <= NF; i++) if ($i ~ /decode t\/s/) c = i }
               c && /^\| t=/ { v = $c } END { gsub(/ /, "", v); print (v == "" ? "failed" : v) }' "$log"
}
median() { tr ' ' '\n' | grep -E '^[0-9.]+$' | sort -g | awk '{ v[NR] = $1 } END {
    if (NR == 0) print "-"; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
echo "A: '${A}'  B: '${B}'  ($ROUNDS rounds of -n $TOKENS; $($TERN --version 2>/dev/null | head -1))"
for m in $MODELS; do
    file=${m%%:*} shape=${m#*:}
    if [ ! -f "$file" ]; then
        "$TERN" mkmodel --shape "$shape" "$file" -t "$(nproc)" --vocab tests/golden/vocab/ggml-vocab-llama-spm.gguf \
            >"$OUT/mkmodel-$shape.log" 2>&1 || { echo "mkmodel $shape failed: $OUT/mkmodel-$shape.log"; bad=1; continue; }
    fi
    for p in $PROMPTS; do
        ta="" tb=""
        for r in $(seq 1 "$ROUNDS"); do
            order="a b"
            [ $((r % 2)) -eq 0 ] && order="b a"
            for w in $order; do
                opts=$A
                [ "$w" = b ] && opts=$B
                v=$(run "$OUT/$shape-p$p-$w$r.log" "$opts" -m "$file" -p "$p" -n "$TOKENS" -r 1) || bad=1
                if [ "$w" = a ]; then ta="$ta $v"; else tb="$tb $v"; fi
            done
        done
        ma=$(echo $ta | median) mb=$(echo $tb | median)
        ratio=$(awk -v a="$ma" -v b="$mb" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.3f", b / a; else print "-" }')
        echo "$shape p$p decode t/s  A:$ta  B:$tb  medians $ma / $mb  B/A $ratio"
    done
    for w in a b; do
        opts=$A
        [ "$w" = b ] && opts=$B
        TERN_OPENCL_PROFILE=1 TERN_OPENCL_OPTIONS="$opts" "$TERN" bench --backend opencl -m "$file" -p 16 -n 64 -r 1 \
            >"$OUT/$shape-profile-$w.log" 2>&1 || bad=1
        echo "$shape profile $w (p16, 64 tokens): $OUT/$shape-profile-$w.log"
        # the first profile block (the token's kernels; bench's bandwidth probe logs its own after)
        awk '/OpenCL profile on/ { n++ } n == 1 && /^  [a-z]/ && !/^  (kernel|wall) /' "$OUT/$shape-profile-$w.log" |
            sort -k3 -g -r | head -8 | sed 's/^/   /'
    done
done
exit "$bad"
