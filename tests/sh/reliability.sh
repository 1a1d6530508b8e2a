#!/usr/bin/env bash
# docs/reliability.md cases 1-30 through the tern command. Every bad model of tests/support/badmodel.c
# (written by tests/gen_bad_models.c) goes through `tern info`, `tern run` and `tern chat`, and
# the container cases through `tern quantize`: exit status 1 (never a signal, never a hang),
# exactly one line on stderr naming the problem, nothing on stdout, no output file left. Then the
# cases that need a command line: prompts over the context or over 2^31 bytes, the context full
# while generating, contexts above the trained length, OpenCL forced without a driver, a run at
# the full trained context with the FP16 KV cache, Ctrl-C in chat (tests/sh/chat_sigint.py),
# RLIMIT_AS during load and context creation, and a model replaced on disk while in use.
set -u
BUILD=${BUILD:-build}
cd "$(dirname "$0")/../.."
TERN=$BUILD/tern
MODEL=tests/golden/tiny-q4km.gguf

if [ ! -x "$TERN" ] || [ ! -f "$BUILD/libtern.a" ]; then
    echo "!!!!!!!! SKIPPED: $TERN or $BUILD/libtern.a is missing; reliability.sh tested nothing !!!!!!!!"
    exit 0
fi

. tests/support/checks.sh
suppress_pocl_leaks # the OpenCL runs (PoCL) under make asan
show() { sed 's/^/     /' "$@" | head -20; }

# sane DESC: the last command neither hung nor died of a signal.
sane() {
    if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
        fail "$1: hung (killed by timeout)"
        return 1
    elif [ "$rc" -ge 128 ]; then
        fail "$1: died of signal $((rc - 128))"
        show "$tmp/err"
        return 1
    fi
    return 0
}
# rejected DESC WORD: exit 1, nothing on stdout, one stderr line holding WORD.
rejected() {
    sane "$1" || return
    local lines
    lines=$(wc -l <"$tmp/err")
    if [ "$rc" -eq 1 ] && [ "$lines" -eq 1 ] && grep -qF -- "$2" "$tmp/err" && [ ! -s "$tmp/out" ]; then
        ok "$1"
    else
        fail "$1: exit $rc, $lines stderr lines, wanted 1 holding '$2':"
        show "$tmp/err" "$tmp/out"
    fi
}
# failed_last DESC WORD: exit 1, nothing on stdout, the last stderr line (after the start-up
# summary) holds WORD.
failed_last() {
    sane "$1" || return
    if [ "$rc" -eq 1 ] && tail -1 "$tmp/err" | grep -qF -- "$2" && [ ! -s "$tmp/out" ]; then
        ok "$1"
    else
        fail "$1: exit $rc, wanted 1 and a last line holding '$2':"
        show "$tmp/err" "$tmp/out"
    fi
}
# succeeded DESC [WORD FILE]: exit 0 (and FILE holds WORD).
succeeded() {
    sane "$1" || return
    if [ "$rc" -eq 0 ] && { [ $# -lt 3 ] || grep -qF -- "$2" "$3"; }; then
        ok "$1"
    else
        fail "$1: exit $rc${2:+, wanted '$2'}:"
        show "$tmp/err" "$tmp/out"
    fi
}

# ---- the bad files ----------------------------------------------------------------------------
gen=$tmp/gen_bad_models
# Built like the test programs (with the sanitizers under make asan: CC, OPT and LDFLAGS come along).
if ! ${CC:-cc} -std=c11 ${OPT:--O1 -g} -D_GNU_SOURCE -Iinclude -I. tests/gen_bad_models.c \
        tests/support/badmodel.c tests/support/bytes.c "$BUILD/libtern.a" ${LDFLAGS:-} \
        -lm -ldl -pthread -o "$gen"; then
    echo "FAIL cannot build tests/gen_bad_models.c"
    exit 1
fi
mkdir -p "$tmp/bad"
if ! "$gen" "$tmp/bad" >"$tmp/manifest"; then
    echo "FAIL gen_bad_models could not write every case"
    exit 1
fi
rm -f /tmp/tern-template-executed
while IFS=$'\t' read -r name num expect word note; do
    f=$tmp/bad/$name.gguf
    case $expect in
    reject)
        run 30 "$TERN" info "$f"
        rejected "$name ($note): tern info" "$word"
        run 30 "$TERN" run -m "$f" -p hi -n 4
        rejected "$name: tern run" "$word"
        run 30 "$TERN" chat -m "$f"
        rejected "$name: tern chat" "$word"
        if [ "$num" -le 16 ]; then # container damage: quantize must refuse it and leave nothing
            run 30 "$TERN" quantize "$f" "$tmp/q.gguf"
            rejected "$name: tern quantize" "$word"
            if ls "$tmp"/q.gguf* >/dev/null 2>&1; then fail "$name: tern quantize left $(ls "$tmp"/q.gguf*)"; fi
            rm -f "$tmp"/q.gguf*
        fi
        ;;
    warn)
        run 30 "$TERN" info "$f"
        succeeded "$name ($note): tern info warns about $word" "$word" "$tmp/out"
        run 30 "$TERN" run -m "$f" -p hi -n 4 -t 1
        succeeded "$name: tern run warns about $word" "$word" "$tmp/err"
        ;;
    loads) ;; # checked one by one below
    esac
done <"$tmp/manifest"
[ "$(grep -c . "$tmp/manifest")" -ge 50 ] || fail "the manifest lists only $(grep -c . "$tmp/manifest") cases"

# 10: a general.name with an escape sequence and a newline is printed masked.
run 30 "$TERN" info "$tmp/bad/10-escape-in-general-name.gguf"
succeeded "10: general.name with ESC and a newline is masked" "name          evil?[31m red?" "$tmp/out"
if grep -q $'\e' "$tmp/out"; then fail "10: an escape byte reached the output"; fi

# 21: template code is never executed; the format is "plain".
f=$tmp/bad/21-template-code.gguf
run 30 "$TERN" info "$f"
succeeded "21: a template with code is not a known format" "chat format   plain" "$tmp/out"
run 60 "$TERN" run --chat -m "$f" -p "hello" -n 4 -t 1
succeeded "21: tern run --chat works with it"
[ ! -e /tmp/tern-template-executed ] && ok "21: the template's command never ran" ||
    fail "21: /tmp/tern-template-executed exists"

# 25: 1 TiB of weights: the memory plan refuses with the bytes (a sparse file).
f=$tmp/bad/25-huge-model.gguf
run 30 "$TERN" info "$f"
succeeded "25: tern info shows the plan does not fit" "DOES NOT FIT" "$tmp/out"
run 30 "$TERN" run -m "$f" -p hi -n 4
rejected "25: tern run refuses a model larger than memory" "not enough memory: this run needs"
grep -q "GiB is available" "$tmp/err" && ok "25: ... naming the bytes available" || fail "25: no bytes available named"
run 30 "$TERN" run -m "$MODEL" -c 131072 -p hi -n 4
rejected "25: a context of 131072 needs --force" "trained length 4096"

# 27: a NaN in a weight block: --check-numerics names the layer; without it, still an error.
f=$tmp/bad/27-nan-weight.gguf
run 60 "$TERN" run -m "$f" -p "Once upon a time" -n 8 -t 1 --check-numerics
failed_last "27: --check-numerics names the tensor and the layer" "non-finite value (nan) in the output of blk.1.ffn_down.weight of layer 1"
run 60 "$TERN" run -m "$f" -p "Once upon a time" -n 8 -t 1
failed_last "27: without the flag: still an error, no text" "non-finite value (nan) in the output head's input"
failed_last "27: without the flag: the library's hint and the flag that sets it" "(check_numerics names the layer); --check-numerics sets it"

# 29: a NaN or inf scale in a quantized block (Q4_K, Q6_K; the output head's too): --check-numerics
# names the tensor whose product went non-finite, and the OpenCL backend (PoCL's CPU device here)
# names the same one, at the same element.
have_opencl=0
"$TERN" info --devices 2>&1 | grep -q "no OpenCL platform" || have_opencl=1
for name in 27-nan-weight $(cut -f1 "$tmp/manifest" | grep '^29-'); do
    f=$tmp/bad/$name.gguf
    word=$(grep "^$name"$'\t' "$tmp/manifest" | cut -f4)
    [ "$name" = 27-nan-weight ] && word="in the output of blk.1.ffn_down.weight of layer 1"
    run 60 "$TERN" run -m "$f" -p "Once upon a time" -n 4 -t 1 --backend cpu --check-numerics
    failed_last "$name: --check-numerics on the CPU names '$word'" "$word"
    grep -q "check_numerics names the layer\|--check-numerics sets it" "$tmp/err" &&
        fail "$name: the hint to turn on --check-numerics, which is on"
    cpu_says=$(tail -1 "$tmp/err")
    if [ $have_opencl = 1 ]; then
        # 600 s: the first run builds the OpenCL program with PoCL's LLVM, which under make asan
        # on a 2-core machine took 127 s; the later runs find it in $tmp/cache.
        TERN_OPENCL_ANY_DEVICE=1 XDG_CACHE_HOME=$tmp/cache run 600 "$TERN" run -m "$f" -p "Once upon a time" -n 4 -t 1 \
            --backend opencl --check-numerics
        if sane "$name on OpenCL"; then
            [ "$rc" -eq 1 ] && [ "$(tail -1 "$tmp/err")" = "$cpu_says" ] && ok "$name: OpenCL names the same tensor" ||
                { fail "$name: OpenCL exits $rc saying '$(tail -1 "$tmp/err")', the CPU '$cpu_says'"; }
        fi
    fi
done
[ $have_opencl = 1 ] || echo "!!!! 29 on OpenCL skipped: no OpenCL platform"

# ---- prompts and the context (23, 24) ------------------------------------------------------------
head -c 4000 tests/data/gpl-3.txt >"$tmp/long.txt"
run 30 "$TERN" run -m "$MODEL" -c 64 -f "$tmp/long.txt" -n 4
failed_last "23: a prompt longer than the context" "longer than the context"
run 60 "$TERN" run -m "$MODEL" -c 24 -p "Once upon a time" -n 100 --temp 0 -t 1 --json
if sane "23" && [ "$rc" -eq 0 ] && grep -q '"stop":"context full"' "$tmp/out" && grep -q "is full" "$tmp/err"; then
    ok "23: the context fills during generation: a defined stop with a message"
else
    fail "23: context full: exit $rc"
    show "$tmp/err" "$tmp/out"
fi
truncate -s $(((1 << 31) + 1)) "$tmp/huge-prompt.txt" # sparse: no disk used
run 30 "$TERN" run -m "$MODEL" -f "$tmp/huge-prompt.txt" -n 4
rejected "24: a prompt file over 2^31 bytes is refused unread" "File too large"
rm -f "$tmp/huge-prompt.txt"

# ---- OpenCL without a driver (26): what exists today -----------------------------------------------
mkdir -p "$tmp/no-icd"
OCL_ICD_VENDORS=$tmp/no-icd run 60 "$TERN" run --backend opencl -m "$MODEL" -p hi -n 4 -t 1
sane "26" && [ "$rc" -eq 1 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -qi "opencl" "$tmp/err" &&
    ok "26: --backend opencl without a driver: exit 1 naming OpenCL" ||
    { fail "26: forced OpenCL without a driver: exit $rc"; show "$tmp/err"; }
OCL_ICD_VENDORS=$tmp/no-icd run 60 "$TERN" run --backend auto -m "$MODEL" -p hi -n 4 -t 1
sane "26" && [ "$rc" -eq 0 ] && grep -q "^backend  cpu" "$tmp/err" &&
    ok "26: auto without a driver: runs on the CPU and says so ($(grep '^backend' "$tmp/err" | cut -c10-))" ||
    { fail "26: auto without a driver: exit $rc"; show "$tmp/err"; }

# ---- 27: the full trained context with the FP16 KV cache, every layer checked ------------------
# 17000 bytes of the GPL are about 4060 tokens; generation then runs into the end of the context.
head -c 17000 tests/data/gpl-3.txt >"$tmp/ctx.txt"
run 300 "$TERN" run -m "$MODEL" -c 4096 -f "$tmp/ctx.txt" -n 64 --temp 0 --check-numerics --json
if sane "27" && [ "$rc" -eq 0 ] && grep -q '"stop":"context full"' "$tmp/out"; then
    ok "27: 4096 positions with the FP16 KV cache: no inf/NaN in any layer ($(grep -o '[0-9]* prompt tokens in [0-9]* ms' "$tmp/err"))"
else
    fail "27: the full context: exit $rc"
    show "$tmp/err"
fi

# ---- 28: Ctrl-C in chat, on a pseudo-terminal ----------------------------------------------------
if command -v python3 >/dev/null; then
    if timeout -k 5 180 python3 tests/sh/chat_sigint.py "$TERN" "$MODEL" >"$tmp/pty" 2>&1; then
        sed 's/^/28: /' "$tmp/pty"
    else
        fail "28: Ctrl-C in chat:"
        show "$tmp/pty"
    fi
else
    echo "!!!! 28 SKIPPED: no python3 for the pseudo-terminal test"
fi

# ---- fault: RLIMIT_AS during load and context creation -------------------------------------------
# From too little address space to enough, every failure must be exit 1 with one line that names a
# size. ASan reserves terabytes of shadow memory, so this runs on plain builds only.
if nm "$TERN" 2>/dev/null | grep -q __asan_init; then
    echo "!!!! RLIMIT_AS sweep skipped under AddressSanitizer"
else
    seen_map=0 seen_ctx=0 seen_ok=0
    for kb in $(seq 8192 2048 65536); do
        (ulimit -v "$kb" && exec "$TERN" run -m "$MODEL" -p hi -n 2 -t 1) >"$tmp/out" 2>"$tmp/err" </dev/null
        rc=$?
        if [ "$rc" -eq 0 ]; then
            seen_ok=1
        elif [ "$rc" -eq 1 ] && grep -qE "[0-9] bytes|[0-9] MiB|[0-9] GiB" "$tmp/err" && [ "$(wc -l <"$tmp/err")" -le 7 ]; then
            grep -q "cannot map" "$tmp/err" && seen_map=1
            grep -q "cannot allocate this context" "$tmp/err" && seen_ctx=1
        elif [ "$rc" -eq 127 ] && grep -q "error while loading shared libraries" "$tmp/err"; then
            : # the dynamic loader, before tern runs
        else
            fail "RLIMIT_AS ${kb} KiB: exit $rc without a size named:"
            show "$tmp/err"
        fi
    done
    [ $seen_map = 1 ] && ok "RLIMIT_AS: mapping the model fails with its size" || fail "RLIMIT_AS: no mapping failure seen"
    [ $seen_ctx = 1 ] && ok "RLIMIT_AS: the context fails with what it needs" || fail "RLIMIT_AS: no context failure seen"
    [ $seen_ok = 1 ] && ok "RLIMIT_AS: 64 MiB of address space is enough" || fail "RLIMIT_AS: never ran"
fi

# ---- fault: the model file replaced while a chat has it mapped -------------------------------------
# Replacing the file (a new inode renamed over the path) is safe: the mapping keeps the old one.
cp "$MODEL" "$tmp/live.gguf"
mkfifo "$tmp/in"
timeout -k 5 120 "$TERN" chat -m "$tmp/live.gguf" -n 8 --temp 0 -t 1 <"$tmp/in" >"$tmp/chat" 2>&1 &
pid=$!
exec 3>"$tmp/in"
for _ in $(seq 100); do grep -q "chat ready" "$tmp/chat" && break; sleep 0.2; done
cp tests/golden/tiny-tied-q4km.gguf "$tmp/new.gguf" && mv "$tmp/new.gguf" "$tmp/live.gguf"
printf 'hello\n/exit\n' >&3
exec 3>&-
wait $pid
rc=$?
sane "model replaced while mapped" && [ "$rc" -eq 0 ] && grep -q "bye" "$tmp/chat" &&
    ok "the model file replaced (renamed over) during a chat: the chat goes on" ||
    { fail "model replaced while mapped: exit $rc"; show "$tmp/chat"; }

finish reliability.sh
