#!/usr/bin/env bash
# tern bench and tern kbench end to end on the tiny golden model, kept short (one thread, a few
# tokens): the tables, the JSON (system description, every run, telemetry samples read from a
# fake phone), CSV, lists of values, --cold, the SVG plot, the ladder, a run that cannot fit,
# and kbench's bandwidth and kernel rows.
set -u
BUILD=${BUILD:-build}
cd "$(dirname "$0")/../.."
TERN=$BUILD/tern
Q4=tests/golden/tiny-q4km.gguf
PHONE=tests/data/sysroot/phone-throttled

if [ ! -x "$TERN" ] || ! command -v jq >/dev/null; then
    echo "!!!!!!!! SKIPPED: $TERN or jq is missing; bench.sh tested nothing !!!!!!!!"
    exit 0
fi
. tests/support/checks.sh
export TERN_OPENCL_LIBRARY=/nonexistent/libOpenCL.so.1

# ---- arguments ----
expect "bench --help" 0 "$TERN" bench --help
has "help names the roofline" "roofline"
expect "no model: usage" 2 "$TERN" bench
expect "bad -o: usage" 2 "$TERN" bench -m "$Q4" -o xml
expect "bad list: usage" 2 "$TERN" bench -m "$Q4" -t 1,x

# ---- markdown: every run and the median ----
expect "bench md" 0 "$TERN" bench -m "$Q4" -t 1 -p 16 -n 8 -r 2
has "a row per run" "^\| t=1 auto ctx=default p=16 n=8 \| 2 \|"
has "page cache state shown" "\| (warm|cold|partial) [0-9]+% \|"
has "median table" "^median \(min-max\) over 2 runs"
has "bandwidth line" "^read bandwidth [0-9.]+ GB/s on 1 thread"
has "roofline line" "read per token .* tokens/s"
has "roofline names the bandwidth it used" "^roofline of t=1 .* at [0-9.]+(-[0-9.]+)? GB/s \(read bandwidth on 1 thread, measured\) -> "

# ---- JSON on the throttled phone: system, runs, telemetry ----
TERN_SYSROOT=$PHONE "$TERN" bench -m "$Q4" -t 1 -p 16 -n 64 -r 2 --interval 10 -o json >"$tmp/out" 2>"$tmp/err" \
    && ok "bench json on the phone tree" || fail "bench json on the phone tree"
json "valid JSON with 2 runs" '.configs[0].runs | length == 2'
json "system description" '.system.cpu_model == "Qualcomm Technologies, Inc SM8350" and .system.isa != "" and .system.tern.version != ""'
json "model and quant mix" '.model.quant_mix | test("Q4_K x25")'
json "bandwidth measured" '.bandwidth[0].median_gbs > 0 and .bandwidth[0].threads == 1'
json "decode and roofline" '.configs[0].runs[0].decode_tps > 0 and .configs[0].runs[0].roofline_pct > 0'
json "prefill, first token, load" '.configs[0].runs[0].prefill_tps > 0 and .configs[0].runs[0].first_token_ms > 0 and .configs[0].runs[0].load_ms > 0'
json "telemetry samples kept" '[.configs[0].runs[].telemetry.samples | length] | min >= 1'
json "samples read the tree: X1 at 844800 kHz, 86.1 C" '.configs[0].runs[0].telemetry.samples[0] | .cpu_khz[7] == 844800 and (.temp_mc | max) == 86100'
json "table summary: clock and temperature" '.configs[0].runs[0] | .clock_min_mhz == 830 and .temp_max_c == 86.1 and .temp_max_zone == "cpu-1-1-usr"'
json "median (min-max) summary" '.configs[0].summary.decode_tps.n == 2 and .configs[0].summary.decode_tps.min <= .configs[0].summary.decode_tps.max'
json "peak RSS" '.configs[0].runs[0].peak_rss > 1000000'
json "launches per decode token: none with one thread" '.configs[0].runs[0].launches_per_token == 0'
json "no device wait on the CPU" '.configs[0].runs[0].wait_ms_per_token == null and .configs[0].runs[0].host_ms_per_token == null'

# ---- lists, CSV, --cold ----
expect "lists run every combination (csv)" 0 "$TERN" bench -m "$Q4" -t 1 -p 8,16 -n 4 -r 1 -o csv --cold
lines=$(wc -l <"$tmp/out")
[ "$lines" -eq 3 ] && ok "csv: header + 2 rows" || fail "csv: $lines lines, wanted 3"
has "csv: both prompt lengths" ',1,[0-9]+,8,4,1,1,'
has "csv: dropped column set" ',1,[0-9]+,16,4,1,1,[0-9.]+,1,'

# ---- the plot ----
expect "bench --plot" 0 "$TERN" bench -m "$Q4" -t 1 -p 16 -n 100 -r 1 --interval 10 --plot "$tmp/p.svg"
if grep -q "<polyline" "$tmp/p.svg" && grep -q "decode tokens/s" "$tmp/p.svg" && tail -1 "$tmp/p.svg" | grep -q "</svg>"; then
    ok "svg has the decode line"
else
    fail "svg incomplete"
fi
if command -v rsvg-convert >/dev/null; then
    rsvg-convert "$tmp/p.svg" -o "$tmp/p.png" 2>"$tmp/err" && ok "svg renders (rsvg-convert)" || fail "svg does not render: $(cat "$tmp/err")"
fi

# ---- this machine: how the weights are mapped (/proc/self/smaps) ----
expect "bench json here" 0 "$TERN" bench -m "$Q4" -t 1 -p 16 -n 8 -r 1 -o json
json "a CPU run says how much of the file it read through 2 MiB pages" \
    '.configs[0].runs[0].huge_page_share | type == "number" and . >= 0 and . <= 1'

# ---- a run that cannot fit ----
expect "p + n above ctx fails" 1 "$TERN" bench -m "$Q4" -t 1 -p 200 -n 100 --ctx 256 -r 1
grep -q "do not fit in the context of 256" "$tmp/err" && ok "names the context" || fail "no context message"

# ---- the ladder ----
expect "ladder" 0 env TMPDIR="$tmp" "$TERN" bench -m "$Q4" --ladder -t 1 -p 16 -n 8 -r 1
has "step 0: the write-up's defaults" "^\| 0 \| write-up defaults: F16 weights, CPU only, 1 thread, ctx 8192 \| [0-9.]+ "
has "step 1: the quantized model as given, with a factor" "^\| 1 \| weights as given \(.*Q4_K x[0-9]+.*\) \| [0-9.]+ \| [0-9]+ \| [0-9]+ \| [0-9.]+x \| [0-9.]+x"
has "GPU step skipped with the reason" "^\| 2 \| GPU backend .* skipped: no GPU backend here: "
has "memory and power steps skipped" "^\| 5 \| power: .* skipped: "
has "context step ran" "^\| 6 \| context: .* \| [0-9.]+x \| [0-9.]+x \|"
ls "$tmp"/tern-ladder-* >/dev/null 2>&1 && fail "ladder left its F16 file" || ok "ladder removed its F16 file"

# ---- mkmodel: the real models' shapes (two layers: the width, the vocabulary, the arch's tensors) ----
for shape in smollm2-135m:llama gemma3-270m:gemma3; do
    expect "mkmodel --shape ${shape%%:*} --layers 2" 0 "$TERN" mkmodel --shape "${shape%%:*}" --layers 2 -t 2 "$tmp/shape.gguf"
    expect "${shape%%:*} runs" 0 "$TERN" run -m "$tmp/shape.gguf" -p hello -n 2 --temp 0 -t 1
    expect "${shape%%:*} info" 0 "$TERN" info "$tmp/shape.gguf"
    has "${shape%%:*} is ${shape##*:}" "${shape##*:}"
done
expect "mkmodel --shape gemma2-2b --as-llama" 0 "$TERN" mkmodel --shape gemma2-2b --as-llama --layers 2 -t 2 "$tmp/shape.gguf"
expect "the llama twin's info" 0 "$TERN" info "$tmp/shape.gguf"
has "the twin is a llama" "^architecture +llama"
has "with gemma2's heads" "8 heads, 4 KV heads, head size 256"
expect "the llama twin runs" 0 "$TERN" run -m "$tmp/shape.gguf" -p hello -n 2 --temp 0 -t 1

# ---- kbench ----
expect "kbench --help" 0 "$TERN" kbench --help
expect "kbench unknown kernel" 2 "$TERN" kbench --kernel nope
expect "kbench rope (json)" 0 "$TERN" kbench --kernel rope -o json
json "kbench bandwidth on 1..N threads" '.bandwidth[0].threads == 1 and .bandwidth[0].median_gbs > 0 and .roofline_gbs > 0'
json "kbench: rope on every path, both models" '[.results[] | select(.family == "rope")] | length >= 2 and (map(.model) | unique == ["1B", "7B"])'
json "kbench: the reference path is measured" '[.results[] | .isa] | index("ref") != null'
expect "kbench Q8_0 gemm (md)" 0 "$TERN" kbench --kernel Q8_0 --isa ref -t 1
has "decode gemm row with a roofline share" "^\| \| ref \| Q8_0 \| 7B \| ffn_up 11008x4096 \| 1 \| 1 \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \| [0-9]+ \|"
expect "kbench --quick, a lower-case type (json)" 0 "$TERN" kbench --kernel q4_0 --isa ref --quick -t 1 -o json
json "--quick: the 1B shapes, 64 MiB reads" '(.results | length) >= 1 and ([.results[] | .model] | unique == ["1B"]) and ([.results[] | .type] | unique == ["Q4_0"]) and .bandwidth[0].bytes == 67108864'
expect "kbench attention --quick (json)" 0 "$TERN" kbench --kernel attention --quick -t 1 -o json
json "attention: decode (m=1, a roofline share) and a prompt block (m=16) on every path" '[.results[] | select(.family == "attention")] as $a | ($a | map(.m) | unique == [1, 16]) and ($a | map(select(.m == 1) | .roofline_pct >= 0) | all) and ($a | map(.gflops > 0) | all) and ([$a[] | .isa] | unique | length) == ([.results[] | .isa] | unique | length)'
expect "kbench --quick --full: usage" 2 "$TERN" kbench --quick --full
expect "kbench --backend opencl without a runtime: exit 1" 1 "$TERN" kbench --backend opencl --isa opencl --kernel rope --quick
has "the reason" "^skipped: --backend opencl: no OpenCL: .*/nonexistent/libOpenCL.so.1 not found"

finish bench.sh
