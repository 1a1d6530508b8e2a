#!/usr/bin/env bash
# tern kbench and tern bench on the first OpenCL device (PoCL in CI), kept short with --quick and
# the tiny golden model:
#  - kbench --backend opencl: the device's read bandwidth (bandwidth.cl), decode gemm rows with
#    GB/s and a share of that bandwidth, the read kernel in launches of each decode product's
#    size, device-time rows under TERN_OPENCL_PROFILE=1, the prefill row in GFLOP/s, the fused q/k/v row, the
#    attention and row-operation rows, --kernel in either case, TERN_OPENCL_OPTIONS reaching the
#    build;
#  - bench --backend opencl: a % roofline against the device's read bandwidth, measured once per
#    device per invocation, named in the report.
# Without any OpenCL platform it says SKIP loudly and exits 0.
set -u
BUILD=${BUILD:-build}
cd "$(dirname "$0")/../.."
TERN=$BUILD/tern
Q4=tests/golden/tiny-q4km.gguf

if [ ! -x "$TERN" ] || ! command -v jq >/dev/null; then
    echo "!!!!!!!! SKIPPED: $TERN or jq is missing; kbench_opencl.sh tested nothing !!!!!!!!"
    exit 0
fi
if "$TERN" info --devices 2>&1 | grep -q "no OpenCL platform"; then
    echo "!!!!!!!! SKIP: no OpenCL platform on this machine; kbench_opencl.sh tested nothing !!!!!!!!"
    exit 0
fi

. tests/support/checks.sh
# The program cache stays the user's (not a fresh one, as opencl.sh uses): building the kernels on
# PoCL takes about 15 s, a cached program a fraction of a second.
# Under AddressSanitizer (make asan): PoCL's LLVM keeps allocations until exit on purpose.
suppress_pocl_leaks

# ---- kbench: Q4_K on the device alone, lower-case name ----
expect "kbench opencl q4_k (json)" 0 "$TERN" kbench --backend opencl --isa opencl --kernel q4_k --quick -o json
json "the device's read bandwidth" '.opencl_gbs > 0 and .opencl_bandwidth.median_gbs == .opencl_gbs and .opencl_bandwidth.bytes >= 1048576 and .opencl_bandwidth.reps >= 1'
json "the device is named" '.opencl | test("^device [0-9]+, ")'
json "only opencl rows, only Q4_K gemm and the read kernel" '(.results | length) >= 3 and ([.results[] | select(.isa != "opencl" or .family != "gemm" or (.type != "Q4_K" and .type != "read_bw"))] | length == 0)'
json "the read kernel in launches of each decode product's bytes, rated" '[.results[] | select(.type == "Q4_K" and .m == 1) | .shape] as $d | [.results[] | select(.type == "read_bw")] | length == ($d | length) and (map(.shape) | sort) == ($d | sort) and all(.[]; .gbs > 0 and .m == 1 and .roofline_pct > 0)'
json "decode gemm: GB/s and a share of the device's bandwidth" '[.results[] | select(.type == "Q4_K" and .m == 1 and (.shape | startswith("ffn_up")))] | length == 1 and (.[0] | .gbs > 0 and .ms_median > 0 and .roofline_pct > 0 and (.roofline_pct - 100 * .gbs / $bw | fabs) < 0.5)' --argjson bw "$(jq .opencl_gbs "$tmp/out")"
json "prefill gemm: GFLOP/s, not rated against the bandwidth" '[.results[] | select(.m == 64)] | length == 1 and .[0].gflops > 0 and .[0].roofline_pct == null'
json "the fused q/k/v launch" '[.results[] | select(.type == "Q4_K" and (.shape | startswith("attn_qkv")))] | length == 1 and .[0].m == 1 and .[0].gbs > 0 and .[0].rows == 2560'
json "nothing skipped" '.skipped == []'
json "no kernel-time rows unless profiling" '[.results[] | select(.shape | endswith(", kernel"))] | length == 0'
expect "kbench opencl q4_k, profiled (json)" 0 env TERN_OPENCL_PROFILE=1 "$TERN" kbench --backend opencl --isa opencl --kernel q4_k --quick -o json
json "profiled: every decode row has its device time beside it" '[.results[] | select(.m == 1 and (.shape | endswith(", kernel") | not)) | .shape + ", kernel"] as $want | ([.results[] | select(.shape | endswith(", kernel")) | select(.ms_median > 0 and .gbs > 0 and .roofline_pct > 0) | .shape] | sort) == ($want | sort)'

# ---- kbench: attention and the row operations, markdown ----
expect "kbench opencl attention (md)" 0 "$TERN" kbench --backend opencl --isa opencl --kernel attention --quick
has "attention row with a roofline share" "^\| \| opencl \| F16 KV \| 1B \| ctx 512, 32 heads x 64 \| 1 \| – \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \| [0-9]+ \|" "$tmp/out"
has "the OpenCL read bandwidth line" "^OpenCL read bandwidth: [0-9.]+ GB/s \(a plain read kernel" "$tmp/out"
expect "kbench opencl glu (json)" 0 "$TERN" kbench --backend opencl --isa opencl --kernel glu --quick -o json
json "glu rows: silu and gelu" '[.results[] | select(.isa == "opencl" and .family == "glu" and .gbs > 0) | .type] | sort == ["gelu", "silu"]'
expect "kbench opencl rmsnorm (json)" 0 "$TERN" kbench --backend opencl --isa opencl --kernel rmsnorm --quick -o json
json "rmsnorm and add_rmsnorm rows" '[.results[] | select(.isa == "opencl" and .family == "rmsnorm" and .gbs > 0) | .type] | sort == ["add+f32", "f32"]'

# ---- kbench: a launch a step against a barrier a step ----
expect "kbench opencl sync (json)" 0 "$TERN" kbench --backend opencl --isa opencl --kernel sync --quick -o json
json "sync: a launch row and a one-group-a-unit row for each size" '[.results[] | select(.family == "sync" and .ms_median > 0 and .gbs > 0)] | (map(select(.type == "launch")) | length) == 2 and (map(select(.type == "grid x1")) | length) == 2'
json "sync: more groups than run at once is a note, not a failure" '.skipped == [] and all(.notes[]; test("gave up waiting|did not run"))'

# ---- kbench: the build options (bench.sh tests a missing runtime) ----
expect "TERN_OPENCL_OPTIONS reaches the program build" 1 env TERN_OPENCL_OPTIONS=-DMV_ROWS=x "$TERN" kbench --backend opencl --isa opencl --kernel rope --quick
has "the bad tunable is named" "MV_ROWS needs an integer in 1..65536" "$tmp/out"

# ---- bench: the roofline of an OpenCL run, the device's bandwidth measured once ----
expect "bench --backend opencl (md)" 0 env TERN_OPENCL_PROFILE=1 "$TERN" bench -m "$Q4" --backend opencl -t 1 -p 16 -n 8 -r 2
has "every run has a % roofline" "^\| t=1 opencl ctx=default p=16 n=8 \| 2 \| [^|]+ \| [^|]+ \| [0-9]+ \| [0-9]+ \| [0-9.]+ \| [0-9.]+( \(stopped early\))? \| [0-9]+ \|" "$tmp/out"
has "the median has one" "^\| t=1 opencl ctx=default p=16 n=8 \| [^|]+ \| [^|]+ \| [^|]+ \| [^|]+ \| [^|]+ \| [0-9]+( \([0-9]+-[0-9]+\))? \|" "$tmp/out"
has "the device's bandwidth is reported" "^OpenCL read bandwidth [0-9.]+ GB/s on .+ \(a plain read kernel" "$tmp/out"
has "the roofline names the bandwidth it used" "^roofline of t=1 opencl .* at [0-9.]+ GB/s \(OpenCL read kernel on .+, measured\) -> [0-9.]+ tokens/s" "$tmp/out"
n=$(grep -c "^  read_bw " "$tmp/err")
[ "$n" -eq 1 ] && ok "the device's bandwidth measured once for 2 runs" || fail "read_bw ran on $n handles, wanted 1"
expect "bench --backend opencl (json)" 0 "$TERN" bench -m "$Q4" --backend opencl -t 1 -p 16 -n 8 -r 1 -o json
json "run: roofline against the device" '.configs[0].runs[0] | .roofline_pct > 0 and .bandwidth_gbs > 0 and (.bandwidth_source | startswith("OpenCL read kernel on "))'
json "the device bandwidth entry" '.device_bandwidth | length == 1 and .[0].median_gbs > 0 and .[0].error == ""'

finish kbench_opencl.sh
