# Sourced by the scripts of tests/sh: a scratch folder and the checks they share.
#   ok DESC, fail DESC          report one check ("ok   ..." / "FAIL ..."; failures are counted)
#   expect DESC STATUS CMD...   run CMD, stdout to $tmp/out, stderr to $tmp/err, both (stdout
#                               first) to $tmp/all; pass when it exits with STATUS (else show
#                               the end of both); retried like run's
#   has DESC REGEX [FILE]       pass when FILE ($tmp/out by default) has a line matching REGEX
#   json DESC JQ-EXPR [ARGS...] pass when the jq expression (given ARGS, e.g. --arg) is true
#                               on $tmp/out
#   run TIMEOUT CMD...          run CMD with a time limit and stdin /dev/null; stdout in $tmp/out,
#                               stderr in $tmp/err, its status in $rc; run once more when only
#                               LeakSanitizer's tracer failed at exit (lsan_tracer_failed)
#   suppress_pocl_leaks         LeakSanitizer (make asan) ignores PoCL's LLVM, which keeps its
#                               allocations until exit on purpose; none of that is ours
#   finish NAME                 the summary line; exits 1 when any check failed, else 0
. "$(dirname "${BASH_SOURCE[0]}")/lsan.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0

ok() { echo "ok   $1"; }
fail() {
    echo "FAIL $1"
    failures=$((failures + 1))
}

# capture CMD...: CMD's stdout to $tmp/out, stderr to $tmp/err, its status returned; run once
# more when only LeakSanitizer's tracer failed at exit (lsan.sh).
capture() {
    "$@" >"$tmp/out" 2>"$tmp/err"
    local st=$?
    if [ "$st" -ne 0 ] && lsan_tracer_failed "$tmp/err"; then
        echo "(LeakSanitizer's tracer failed at exit: running '$*' once more)" | cut -c1-200
        "$@" >"$tmp/out" 2>"$tmp/err"
        st=$?
    fi
    return "$st"
}

expect() {
    local desc=$1 want=$2
    shift 2
    capture "$@"
    local got=$?
    cat "$tmp/out" "$tmp/err" >"$tmp/all"
    if [ "$got" -eq "$want" ]; then
        ok "$desc"
    else
        fail "$desc: exit $got, wanted $want"
        sed 's/^/     /' "$tmp/err" "$tmp/out" | tail -8
    fi
}

has() {
    local file=${3:-$tmp/out}
    if grep -Eq -- "$2" "$file"; then
        ok "$1"
    else
        fail "$1: no /$2/ in:"
        sed 's/^/     /' "$file" | head -30
    fi
}

json() {
    if jq -e "${@:3}" "$2" "$tmp/out" >/dev/null 2>&1; then
        ok "$1"
    else
        fail "$1: not ($2)"
        head -c 3000 "$tmp/out" | sed 's/^/     /'
        echo
    fi
}

run() {
    local t=$1
    shift
    capture timeout -k 5 "$t" "$@" </dev/null
    rc=$?
}

suppress_pocl_leaks() {
    printf 'leak:libLLVM\nleak:libpocl\nleak:libclang\nleak:libstdc++\n' >"$tmp/lsan.supp"
    # print_suppressions=0: the last line of stderr stays tern's own (checks compare it)
    export LSAN_OPTIONS="suppressions=$tmp/lsan.supp:print_suppressions=0${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
}

finish() {
    if [ "$failures" -ne 0 ]; then
        echo "$1: $failures check(s) failed"
        exit 1
    fi
    echo "$1: all checks passed"
    exit 0
}
