#!/usr/bin/env bash
# docs/reliability.md, "At the edges": where output goes, signals, degenerate inputs and what the
# messages say, through the tern command. Each check names the fault it provokes:
#   OUT of quantize/mkmodel that is a FIFO, a device, a directory, a symbolic link, the input by
#   a hard link; stdout full (/dev/full) or closed for every command that writes; Ctrl-C during
#   `tern run` (text and --json); SIGHUP, SIGQUIT, SIGTERM and a file size limit while a model is
#   written; perplexity with -c 1 and 2; run -f of a directory and of a FIFO without a writer; an
#   architecture name with a NUL byte; misleading messages (issue 18, item 8).
set -u
BUILD=${BUILD:-build}
cd "$(dirname "$0")/../.."
TERN=$BUILD/tern
MODEL=tests/golden/tiny-q4km.gguf
VOCAB=tests/golden/vocab/ggml-vocab-llama-spm.gguf

if [ ! -x "$TERN" ]; then
    echo "!!!!!!!! SKIPPED: $TERN is missing; edges.sh tested nothing !!!!!!!!"
    exit 0
fi
. tests/support/checks.sh
suppress_pocl_leaks
show() { sed 's/^/     /' "$@" | head -12; }

# signal_after FILE REGEX SECONDS SIG CMD...: starts CMD (stdout in $tmp/out, stderr in $tmp/err),
# waits until FILE matches REGEX (a glob for a path when REGEX is -), SECONDS more, sends SIG to
# it (not to a wrapper, which might handle it), then waits: status in $rc. A watchdog kills it
# after 120 s.
signal_after() {
    local file=$1 regex=$2 delay=$3 sig=$4
    shift 4
    "$@" >"$tmp/out" 2>"$tmp/err" </dev/null &
    local pid=$!
    (sleep 120 && kill -9 "$pid") 2>/dev/null &
    local dog=$!
    for _ in $(seq 400); do
        if [ "$regex" = - ]; then compgen -G "$file" >/dev/null && break; else grep -q "$regex" "$file" && break; fi
        sleep 0.05
    done
    sleep "$delay"
    kill -s "$sig" "$pid"
    wait "$pid"
    rc=$?
    kill "$dog" 2>/dev/null
    wait "$dog" 2>/dev/null
}
# refused DESC STATUS WORD: exit STATUS, the last stderr line holds WORD.
refused() {
    if [ "$rc" -eq "$2" ] && tail -1 "$tmp/err" | grep -qF -- "$3"; then
        ok "$1"
    else
        fail "$1: exit $rc, wanted $2 and a last stderr line holding '$3':"
        show "$tmp/err"
    fi
}
# no_temp DIR: no *.tmp.* file was left in DIR.
no_temp() {
    if ls "$1"/*.tmp.* >/dev/null 2>&1; then fail "$2: left $(ls "$1"/*.tmp.*)"; else ok "$2: no temporary file left"; fi
}

# ---- 1: OUT that is not a regular file ----------------------------------------------------------
out=$tmp/outs
mkdir -p "$out"
F32=$tmp/tiny-f32.gguf # a source quantize converts to any type
"$TERN" mkmodel --shape tiny --type F32 --vocab "$VOCAB" "$F32" >/dev/null 2>&1 || fail "mkmodel of the F32 source"
mkfifo "$out/fifo"
run 30 "$TERN" quantize "$F32" "$out/fifo" Q8_0
refused "quantize OUT = a FIFO: refused" 2 "is a FIFO"
[ -p "$out/fifo" ] && ok "the FIFO is still there" || fail "the FIFO was replaced"
mkdir "$out/dir"
run 30 "$TERN" quantize "$F32" "$out/dir" Q8_0
refused "quantize OUT = a directory: refused" 2 "is a directory"
run 30 "$TERN" mkmodel --shape tiny "$out/dir"
refused "mkmodel OUT = a directory: refused" 2 "is a directory"
# A character device of its own (as root; the machine's /dev is never given as OUT: a tern with
# the bug would replace it). Refused before any file exists, so nothing is written beside it.
if mknod "$out/null" c 1 3 2>/dev/null; then
    run 30 "$TERN" quantize "$F32" "$out/null" Q4_K_M
    refused "quantize OUT = a character device: refused" 2 "is a character device"
    [ -c "$out/null" ] && ok "the device node is still one" || fail "the device node was replaced"
    run 30 "$TERN" mkmodel --shape tiny "$out/null"
    refused "mkmodel OUT = a character device: refused" 2 "is a character device"
    [ -c "$out/null" ] && ok "the device node is still one after mkmodel" || fail "mkmodel replaced the device node"
else
    echo "!!!! character-device OUT skipped: mknod needs root"
fi
printf 'mine' >"$out/target.txt"
ln -s "$out/target.txt" "$out/link.gguf"
run 30 "$TERN" quantize "$F32" "$out/link.gguf" Q8_0
refused "quantize OUT = a symbolic link to another file: refused" 2 "symbolic link"
[ -L "$out/link.gguf" ] && [ "$(cat "$out/target.txt")" = mine ] && ok "the link and its target are untouched" ||
    fail "the link or its target changed"
ln -s "$out/nowhere.gguf" "$out/dangling.gguf"
run 30 "$TERN" mkmodel --shape tiny "$out/dangling.gguf"
refused "mkmodel OUT = a dangling symbolic link: refused" 2 "symbolic link"
cp "$MODEL" "$out/in.gguf"
ln "$out/in.gguf" "$out/hard.gguf"
run 30 "$TERN" quantize "$out/in.gguf" "$out/hard.gguf" Q8_0
refused "quantize OUT = a hard link of IN: refused" 2 "is the input file"
ln -s "$out/in.gguf" "$out/in-link.gguf"
run 30 "$TERN" quantize "$out/in.gguf" "$out/in-link.gguf" Q8_0
refused "quantize OUT = a symbolic link to IN: refused" 2 "is the input file"
cmp -s "$MODEL" "$out/in.gguf" && ok "IN is unchanged" || fail "IN changed"
printf 'old' >"$out/regular.gguf"
run 60 "$TERN" quantize "$MODEL" "$out/regular.gguf" Q4_K_M
[ "$rc" -eq 0 ] && "$TERN" info "$out/regular.gguf" >/dev/null 2>&1 && ok "an existing regular OUT is replaced" ||
    { fail "replacing a regular OUT: exit $rc"; show "$tmp/err"; }
no_temp "$out" "OUT checks"

# ---- 5: signals while a model is written ----------------------------------------------------------
# llama-1b takes tens of seconds: the signal arrives while its temporary file is being written.
for sig in HUP QUIT TERM INT; do
    d=$tmp/sig-$sig
    mkdir -p "$d"
    signal_after "$d/*.tmp.*" - 0.3 "$sig" "$TERN" mkmodel --shape llama-1b --layers 4 -t 1 "$d/m.gguf"
    refused "SIG$sig during mkmodel: exit 1, 'interrupted'" 1 "interrupted"
    no_temp "$d" "SIG$sig during mkmodel"
    [ -e "$d/m.gguf" ] && fail "SIG$sig: an OUT was left" || ok "SIG$sig: no OUT"
done
d=$tmp/xfsz
mkdir -p "$d"
(ulimit -f 512 && exec "$TERN" quantize "$F32" "$d/q.gguf" F16) >"$tmp/out" 2>"$tmp/err" </dev/null
rc=$?
refused "a file size limit (ulimit -f) during quantize: exit 1 naming it" 1 "File too large"
no_temp "$d" "SIGXFSZ during quantize"

# ---- 2: stdout full or closed, for every command that writes --------------------------------------
printf 'The quick brown fox jumps over the lazy dog. %.0s' $(seq 80) >"$tmp/text.txt"
stdout_cases=(
    "run -m $MODEL -p hi -n 8 -t 1 --temp 0"
    "run -m $MODEL -p hi -n 8 -t 1 --temp 0 --json"
    "info $MODEL"
    "info --cpu"
    "perplexity -m $MODEL -f $tmp/text.txt -c 64 -t 1"
    "bench -m $MODEL -p 8 -n 4 -r 1 -t 1 --backend cpu -o json"
    "bench -m $MODEL -p 8 -n 4 -r 1 -t 1 --backend cpu -o csv"
    "bench -m $MODEL -p 8 -n 4 -r 1 -t 1 --backend cpu"
    "doctor --no-measure"
    "kbench --kernel rmsnorm --quick -t 1"
    "mkmodel --list"
    "quantize $F32 $tmp/stdout-q.gguf Q8_0"
    "chat -m $MODEL -n 4 -t 1"
    "run --help"
    "--version"
)
for c in "${stdout_cases[@]}"; do
    # shellcheck disable=SC2086
    timeout -k 5 120 "$TERN" $c >/dev/full 2>"$tmp/err" <<<"hello"
    rc=$?
    refused "tern $c >/dev/full: exit 1" 1 "cannot write to stdout"
    rm -f "$tmp/stdout-q.gguf"
    # shellcheck disable=SC2086
    timeout -k 5 120 "$TERN" $c >&- 2>"$tmp/err" <<<"hello"
    rc=$?
    refused "tern $c with stdout closed: exit 1" 1 "cannot write to stdout: it is closed"
    if [ -e "$tmp/stdout-q.gguf" ] && ! "$TERN" info "$tmp/stdout-q.gguf" >/dev/null 2>&1; then
        fail "stdout closed: quantize's file is damaged (printf wrote into it)"
    fi
    rm -f "$tmp/stdout-q.gguf"
done
# a streaming run stops generating once stdout is gone (does not go on to -n 4000)
timeout -k 5 120 "$TERN" run -m "$MODEL" -p hi -n 4000 -c 4096 -t 1 --temp 0 >/dev/full 2>"$tmp/err" </dev/null
rc=$?
refused "run streaming to /dev/full: exit 1 naming why" 1 "cannot write to stdout: No space left on device"
grep -qE " [0-9] generated in" "$tmp/err" && ok "... stopped after the first failed piece" ||
    { fail "run went on generating into a full stdout"; show "$tmp/err"; }

# ---- 5: Ctrl-C during tern run: it stops and still prints timings and JSON -------------------------
for mode in text json; do
    flag=
    [ $mode = json ] && flag=--json
    signal_after "$tmp/err" "^context" 0.5 INT "$TERN" run -m "$MODEL" -p "Once upon a time" -n 1000000 -c 4096 -t 1 \
        --temp 0.8 --repeat-penalty 1.5 $flag
    refused "Ctrl-C during run ($mode): exit 130 and the timings" 130 "stop: interrupted"
    if [ $mode = json ]; then
        json "Ctrl-C during run --json: one whole JSON object, stop interrupted" '.stop == "interrupted" and (.tokens | length) > 0'
    else
        [ -s "$tmp/out" ] && ok "Ctrl-C during run: the text so far was printed" || fail "Ctrl-C during run: no text"
    fi
done

# ---- 6: degenerate inputs ---------------------------------------------------------------------------
for c in 1 2; do
    run 30 "$TERN" perplexity -m "$MODEL" -f "$tmp/text.txt" -c "$c"
    refused "perplexity -c $c: refused (nothing to score)" 2 "at least 3"
done
run 30 "$TERN" run -m "$MODEL" -f "$tmp" -n 4
refused "run -f DIRECTORY: refused" 1 "Is a directory"
mkfifo "$tmp/prompt-fifo"
run 10 "$TERN" run -m "$MODEL" -f "$tmp/prompt-fifo" -n 4
refused "run -f FIFO with no writer: no hang, refused" 1 "no writer"
printf 'Once upon a time' >"$tmp/prompt-fifo" &
sleep 0.3
run 30 "$TERN" run -m "$MODEL" -f "$tmp/prompt-fifo" -n 4 -t 1
wait
[ "$rc" -eq 0 ] && ok "run -f FIFO with a writer: read like a file" || { fail "run -f FIFO with a writer: exit $rc"; show "$tmp/err"; }
run 30 "$TERN" run -m "$MODEL" -f <(printf 'Once upon a time') -n 4 -t 1
[ "$rc" -eq 0 ] && ok "run -f <(...) (a pipe): works" || { fail "run -f <(...): exit $rc"; show "$tmp/err"; }
# doctor over a sysfs tree with a FIFO where a file is read
root=$tmp/sysroot
mkdir -p "$root/proc" "$root/sys/devices/system/cpu/cpu0/cpufreq"
mkfifo "$root/proc/cpuinfo" "$root/proc/meminfo" "$root/sys/devices/system/cpu/online" \
    "$root/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"
TERN_SYSROOT=$root run 30 "$TERN" doctor --no-measure
[ "$rc" -ne 124 ] && [ "$rc" -ne 137 ] && ok "doctor with FIFOs in its sysfs tree: no hang (exit $rc)" ||
    fail "doctor hung on a FIFO in the sysfs tree"

# ---- 7: the auto backend's probe leaves no OpenCL driver loaded when it ends on the CPU -----------------
# Only where an ICD is installed and the probe falls back (PoCL only, no GPU): then a default run
# must look like --backend cpu from the inside (no libpocl mapped, no LLVM's address space).
if "$TERN" info --devices 2>&1 | grep -q "auto picks: cpu" && ! "$TERN" info --devices 2>&1 | grep -q "no OpenCL platform"; then
    vm_of() { # the VmSize in KiB and the pocl mappings of a run with these extra arguments
        "$TERN" run -m "$MODEL" -p "Once upon a time" -n 1000000 -c 4096 -t 1 "$@" >/dev/null 2>"$tmp/vm-err" </dev/null &
        local pid=$!
        for _ in $(seq 200); do grep -q "^context" "$tmp/vm-err" && break; sleep 0.05; done
        sleep 0.3
        vm=$(awk '/^VmSize/ {print $2}' "/proc/$pid/status")
        pocl=$(grep -c -i pocl "/proc/$pid/maps")
        kill -INT "$pid"
        wait "$pid"
    }
    vm_of --backend cpu
    cpu_vm=$vm
    vm_of
    [ "$pocl" -eq 0 ] && ok "auto fell back to the CPU: no PoCL mapped" || fail "auto fell back, yet $pocl PoCL mappings stay"
    [ "$vm" -lt $((cpu_vm + 65536)) ] && ok "auto's address space is the CPU run's ($vm KiB vs $cpu_vm KiB)" ||
        fail "auto's address space is $vm KiB, the CPU run's $cpu_vm KiB"
    # Under ulimit -v, the default run works wherever --backend cpu does (the probe's driver no
    # longer eats the room), and no limit makes it blame a missing driver that is installed.
    # ASan reserves terabytes of shadow memory: the sweep runs on plain builds only.
    nm "$TERN" 2>/dev/null | grep -q __asan_init && echo "!!!! the ulimit -v sweep skipped under AddressSanitizer"
    sweep_failures=$failures
    nm "$TERN" 2>/dev/null | grep -q __asan_init || for mb in $(seq 256 24 640); do
        (ulimit -v $((mb * 1024)) && exec "$TERN" run -m "$MODEL" -p hi -n 2 -t 1 --backend cpu) >/dev/null 2>&1 </dev/null
        cpu_rc=$?
        (ulimit -v $((mb * 1024)) && exec "$TERN" run -m "$MODEL" -p hi -n 2 -t 1) >/dev/null 2>"$tmp/err" </dev/null
        rc=$?
        if [ $cpu_rc -eq 0 ] && [ $rc -ne 0 ]; then
            fail "ulimit -v ${mb} MiB: --backend cpu runs, the default exits $rc: $(tail -1 "$tmp/err")"
        fi
        grep -q "the ICD loader found no driver)" "$tmp/err" && fail "ulimit -v ${mb} MiB: 'found no driver', yet one is installed"
    done
    if ! nm "$TERN" 2>/dev/null | grep -q __asan_init && [ "$failures" -eq "$sweep_failures" ]; then
        ok "ulimit -v 256..640 MiB: the default run works wherever --backend cpu does"
    fi
else
    echo "!!!! 7 skipped: no OpenCL driver here, or the auto probe picks OpenCL"
fi

# ---- 8: messages that say what happened ---------------------------------------------------------------
run 30 "$TERN" info "$MODEL" "$MODEL"
refused "tern info A B: refused, not describe only B" 2 "one model"
run 30 "$TERN" run -m "$MODEL" -p hi -f "$tmp/text.txt"
refused "run -p and -f together: says both were given" 2 "not both"
run 30 "$TERN" kbench --isa sse9 --quick
refused "kbench --isa sse9: refused by name" 2 "sse9"

# the KV cache type (-ctk/-ctv): info plans Q8_0's 34 bytes per 32 values, other types are refused
# by name, and a run says what its cache holds
kv_bytes() { # the KV cache's size in KiB from tern info's "run at ctx" line
    sed -n 's/.*KV cache \([0-9.]*\) \([KMG]\)iB.*/\1 \2/p' "$tmp/out" |
        awk '{ print $1 * ($2 == "M" ? 1024 : $2 == "G" ? 1048576 : 1) }'
}
run 30 "$TERN" info "$MODEL" --ctx 128
f16_kib=$(kv_bytes)
run 30 "$TERN" info "$MODEL" --ctx 128 -ctk q8_0 -ctv q8_0
q8_kib=$(kv_bytes)
if [ "$rc" -eq 0 ] && grep -q "KV cache .*(Q8_0)" "$tmp/out" &&
    awk -v a="$f16_kib" -v b="$q8_kib" 'BEGIN { exit !(a > 0 && b > 0.52 * a && b < 0.54 * a) }'; then
    ok "info -ctk q8_0 -ctv q8_0: the KV cache is 17/32 of FP16's ($q8_kib vs $f16_kib KiB)"
else
    fail "info -ctk q8_0 -ctv q8_0: KV $q8_kib KiB against FP16's $f16_kib KiB (want 17/32)"
    show "$tmp/out"
fi
run 30 "$TERN" info "$MODEL" -ctk q4_0
refused "info -ctk q4_0: refused naming the types taken" 2 "-ctk takes f16 or q8_0"
run 30 "$TERN" run -m "$MODEL" -p hi -n 2 -ctv bf16
refused "run -ctv bf16: refused naming the types taken" 2 "-ctv takes f16 or q8_0"
run 60 "$TERN" run -m "$MODEL" -p hi -n 2 -t 1 --backend cpu -ctk q8_0 -ctv q8_0
if [ "$rc" -eq 0 ] && grep -q "KV cache Q8_0" "$tmp/err"; then
    ok "run -ctk q8_0 -ctv q8_0: runs and says the cache is Q8_0"
else
    fail "run -ctk q8_0 -ctv q8_0: exit $rc"
    show "$tmp/err"
fi

if ! "$TERN" info --devices 2>&1 | grep -q "no OpenCL platform"; then
    # 600 s: the program is built (PoCL's LLVM, a fresh cache) before the split is refused; under
    # make asan on 2 busy cores that took past the 120 s this once had.
    TERN_OPENCL_ANY_DEVICE=1 TERN_OPENCL_SPLIT=1 XDG_CACHE_HOME=$tmp/cache run 600 "$TERN" run -m "$MODEL" -p hi -n 2 -t 1 \
        --backend opencl
    refused "TERN_OPENCL_SPLIT=1: the split size is named" 1 "over the split size opencl.split_bytes (1 bytes)"
    grep -q "ulimit" "$tmp/err" && fail "TERN_OPENCL_SPLIT=1 is blamed on ulimit"
fi

finish edges.sh
