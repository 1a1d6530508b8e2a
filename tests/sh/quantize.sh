#!/usr/bin/env bash
# tern mkmodel and tern quantize end to end: a tiny F32 model made by mkmodel is quantized to
# several types, and `tern info` must show the per-tensor types the Q4_K_M mixture implies
# (formats.md §4: with 4 layers, attn_v and ffn_down of layers 2 and 3 plus output.weight are
# Q6_K). Bad inputs must fail with exit 1 and leave no output file.
set -u
BUILD=${BUILD:-build}
cd "$(dirname "$0")/../.."
TERN=$BUILD/tern
VOCAB=tests/golden/vocab/ggml-vocab-llama-spm.gguf

if [ ! -x "$TERN" ]; then
    echo "!!!!!!!! SKIPPED: $TERN is missing (the tern command does not link yet); quantize.sh tested nothing !!!!!!!!"
    exit 0
fi

. tests/support/checks.sh

# types FILE PATTERN...: `tern info FILE` loads it and lists each "TYPE xCOUNT".
types() {
    local f=$1
    shift
    expect "tern info $(basename "$f")" 0 "$TERN" info "$f"
    for p in "$@"; do has "$(basename "$f") has $p" "$p([^0-9]|$)" "$tmp/all"; done
}
# no_output FILE: neither FILE nor a temporary beside it exists.
no_output() {
    if ls "$1"* >/dev/null 2>&1; then fail "no output left at $1: found $(ls "$1"*)"; else ok "no output left at $(basename "$1")"; fi
}

expect "quantize --help" 0 "$TERN" quantize --help
has "quantize --help lists the types" "Q5_K_S, Q6_K, Q8_0, Q4_0" "$tmp/all"
expect "mkmodel --help" 0 "$TERN" mkmodel --help
expect "mkmodel --list" 0 "$TERN" mkmodel --list
has "mkmodel --list has llama-7b" "^llama-7b +llama +4096 +32" "$tmp/all"
expect "mkmodel unknown shape" 2 "$TERN" mkmodel --shape nope "$tmp/x.gguf"
expect "quantize unknown type" 2 "$TERN" quantize "$tmp/a" "$tmp/b" Q3_X

# -- the F32 source: the golden tiny model's shape and vocabulary --
f32=$tmp/tiny-f32.gguf
expect "mkmodel tiny F32" 0 "$TERN" mkmodel --shape tiny --type F32 --vocab "$VOCAB" "$f32"
types "$f32" "F32 x39"
has "info: 32000 tokens from the vocab file" "32000" "$tmp/all"
expect "mkmodel again on 1 thread" 0 "$TERN" mkmodel --shape tiny --type F32 --vocab "$VOCAB" -t 1 "$tmp/again.gguf"
if cmp -s "$f32" "$tmp/again.gguf"; then ok "same seed, other thread count: same bytes"; else fail "mkmodel is not deterministic"; fi
expect "mkmodel --seed 1" 0 "$TERN" mkmodel --shape tiny --type F32 --vocab "$VOCAB" --seed 1 "$tmp/seed1.gguf"
if cmp -s "$f32" "$tmp/seed1.gguf"; then fail "another seed gave the same weights"; else ok "another seed, other weights"; fi

# -- quantizing: the mixture, per tensor --
q4=$tmp/tiny-q4km.gguf
expect "quantize to Q4_K_M (default)" 0 "$TERN" quantize "$f32" "$q4"
has "summary names the type and the counts" "Q4_K_M, 39 tensors .*Q6_K x5" "$tmp/all"
has "summary gives bits/weight" "bits/weight" "$tmp/all"
types "$q4" "Q4_K x25" "Q6_K x5" "F32 x9"
expect "quantize to Q8_0" 0 "$TERN" quantize "$f32" "$tmp/q8.gguf" Q8_0
types "$tmp/q8.gguf" "Q8_0 x30" "F32 x9"
expect "quantize to Q6_K" 0 "$TERN" quantize "$f32" "$tmp/q6.gguf" q6_k
types "$tmp/q6.gguf" "Q6_K x30" "F32 x9"
expect "re-quantize Q8_0 to F16" 0 "$TERN" quantize "$tmp/q8.gguf" "$tmp/f16.gguf" F16
types "$tmp/f16.gguf" "F16 x30" "F32 x9"
expect "Q4_K_M to Q4_K_M copies" 0 "$TERN" quantize "$q4" "$tmp/copy.gguf" Q4_K_M
if cmp -s "$q4" "$tmp/copy.gguf"; then ok "copy is byte-identical"; else fail "Q4_K_M -> Q4_K_M changed the file"; fi
expect "Q4_K_M to F16 refused" 1 "$TERN" quantize "$q4" "$tmp/bad.gguf" F16
has "refusal names the tensor and the source type" "convert tensor '.*' from Q[46]_K to F16" "$tmp/all"
no_output "$tmp/bad.gguf"

# -- the input is never overwritten --
sum_before=$(cksum <"$f32")
expect "OUT = IN refused" 2 "$TERN" quantize "$f32" "$f32"
ln "$f32" "$tmp/hardlink.gguf"
expect "OUT = a hard link of IN refused" 2 "$TERN" quantize "$f32" "$tmp/hardlink.gguf"
ln -s "$f32" "$tmp/symlink.gguf"
expect "OUT = IN through a symlink refused" 2 "$TERN" quantize "$tmp/symlink.gguf" "$f32"
if [ "$(cksum <"$f32")" = "$sum_before" ]; then ok "input unchanged"; else fail "input was modified"; fi
expect "mkmodel OUT = --vocab refused" 2 "$TERN" mkmodel --shape tiny --vocab "$f32" "$f32"

# -- damaged inputs: exit 1, one line naming the problem, nothing written --
head -c $(($(stat -c %s "$f32") / 2)) "$f32" >"$tmp/truncated.gguf"
expect "truncated input refused" 1 "$TERN" quantize "$tmp/truncated.gguf" "$tmp/t-out.gguf"
has "names the tensor outside the file" "not within the file" "$tmp/all"
no_output "$tmp/t-out.gguf"
cp "$f32" "$tmp/nan.gguf"
# the last tensor (blk.3.ffn_down.weight, F32, 768 x 256) ends the file without padding
printf '\000\000\300\177' | dd of="$tmp/nan.gguf" bs=1 seek=$(($(stat -c %s "$f32") - 4)) conv=notrunc status=none
expect "NaN in a row refused" 1 "$TERN" quantize "$tmp/nan.gguf" "$tmp/n-out.gguf"
has "names the tensor and row" "blk.3.ffn_down.weight' row 255 holds NaN" "$tmp/all"
no_output "$tmp/n-out.gguf"
expect "missing input" 1 "$TERN" quantize "$tmp/none.gguf" "$tmp/m-out.gguf"
no_output "$tmp/m-out.gguf"

# -- other shapes and the synthetic vocabulary load --
expect "mkmodel tiny, synthetic vocab" 0 "$TERN" mkmodel --shape tiny "$tmp/syn.gguf"
types "$tmp/syn.gguf" "Q4_K x25" "Q6_K x5"
expect "mkmodel qwen2-1.5b, 2 layers" 0 "$TERN" mkmodel --shape qwen2-1.5b --layers 2 --type Q8_0 --vocab "$VOCAB" \
    "$tmp/qwen2.gguf"
# qwen2: tied embeddings (no output.weight), q/k/v biases F32: 2 layers x (3 biases + 2 norms) + output_norm
types "$tmp/qwen2.gguf" "Q8_0 x15" "F32 x11"
has "info: qwen2" "qwen2" "$tmp/all"

finish quantize.sh
