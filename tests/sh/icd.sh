#!/usr/bin/env bash
# A GPU driver that no .icd registers (the lent H200 host shipped libnvidia-opencl.so.1 without
# one, and auto ran on the CPU with no word about the GPU): tern info --devices and tern doctor
# read the ICD registry as the loader will (OCL_ICD_VENDORS or /etc/OpenCL/vendors), name the
# unregistered library and print the commands that register it. Fake machines are built under
# a temporary directory (TERN_SYSROOT); the OpenCL runtime is pointed at a missing library so the
# answers do not depend on this machine's drivers. tests/test_tools.c covers the rules in detail.
set -u
BUILD=${BUILD:-build}
cd "$(dirname "$0")/../.."
TERN=$BUILD/tern
Q4=tests/golden/tiny-q4km.gguf
NV=/usr/lib/x86_64-linux-gnu/libnvidia-opencl.so.1

if [ ! -x "$TERN" ] || ! command -v jq >/dev/null; then
    echo "!!!!!!!! SKIPPED: $TERN or jq is missing; icd.sh tested nothing !!!!!!!!"
    exit 0
fi
. tests/support/checks.sh
export TERN_OPENCL_LIBRARY=/nonexistent/libOpenCL.so.1
unset OCL_ICD_VENDORS OPENCL_VENDOR_PATH

# the H200 host: an x86-64 server (server-8's files) with an NVIDIA device node, PoCL registered
# under its versioned name, NVIDIA's driver beside it with no .icd
h200=$tmp/h200
cp -r tests/data/sysroot/server-8 "$h200"
mkdir -p "$h200/usr/lib/x86_64-linux-gnu" "$h200/etc/OpenCL/vendors" "$h200/dev"
touch "$h200$NV" "$h200/usr/lib/x86_64-linux-gnu/libpocl.so.2" "$h200/usr/lib/x86_64-linux-gnu/libpocl.so.2.10.0" "$h200/dev/nvidia0"
echo libpocl.so.2.10.0 >"$h200/etc/OpenCL/vendors/pocl.icd"

# ---- tern info --devices ----
export TERN_SYSROOT=$h200
expect "info --devices on the H200 host" 0 "$TERN" info --devices
has "the registry it read" '^ICD registry: /etc/OpenCL/vendors \(1 file: pocl\.icd -> libpocl\.so\.2\.10\.0\)$'
has "NVIDIA's library named as unregistered" "^not registered: $NV \(NVIDIA's OpenCL driver\)"
has "fix line 1: the .icd in a directory of its own" "^  mkdir -p /tmp/icd; echo $NV > /tmp/icd/nvidia\.icd$"
has "fix line 2: OCL_ICD_VENDORS, or the file as root" "^  export OCL_ICD_VENDORS=/tmp/icd   \(or, as root: echo $NV > /etc/OpenCL/vendors/nvidia\.icd\)$"
if grep -q "libpocl" <(grep "^not registered" "$tmp/out"); then fail "PoCL reported unregistered"; else ok "PoCL registered by its versioned name"; fi

# the fix applied: OCL_ICD_VENDORS names a directory holding nvidia.icd
mkdir -p "$h200/tmp/icd"
echo "$NV" >"$h200/tmp/icd/nvidia.icd"
expect "info --devices with OCL_ICD_VENDORS" 0 env OCL_ICD_VENDORS=/tmp/icd "$TERN" info --devices
has "OCL_ICD_VENDORS is what it reports" "^ICD registry: OCL_ICD_VENDORS=/tmp/icd \(1 file: nvidia\.icd -> $NV\)$"
if grep -q "^not registered" "$tmp/out"; then fail "still unregistered after the fix"; sed 's/^/     /' "$tmp/out"; else ok "nothing unregistered after the fix"; fi
# OCL_ICD_VENDORS a directory without nvidia.icd: the fix writes into it
mkdir -p "$h200/empty-icd"
expect "info --devices with an empty OCL_ICD_VENDORS directory" 0 env OCL_ICD_VENDORS=/empty-icd "$TERN" info --devices
has "the fix writes into that directory" "^  echo $NV > /empty-icd/nvidia\.icd$"
# one .icd file, and a library, as OCL_ICD_VENDORS
expect "info --devices, OCL_ICD_VENDORS one .icd file" 0 env OCL_ICD_VENDORS=/tmp/icd/nvidia.icd "$TERN" info --devices
has "one file" "^ICD registry: OCL_ICD_VENDORS=/tmp/icd/nvidia\.icd \(the one \.icd file read: nvidia\.icd -> $NV\)$"
expect "info --devices, OCL_ICD_VENDORS missing" 0 env OCL_ICD_VENDORS=/nonexistent "$TERN" info --devices
has "a missing OCL_ICD_VENDORS loads nothing" "^ICD registry: OCL_ICD_VENDORS=/nonexistent \(no such directory, \.icd file or library"
# a driver found through LD_LIBRARY_PATH
mkdir -p "$h200/opt/rocm-x"
touch "$h200/opt/rocm-x/libamdocl64.so"
expect "info --devices with LD_LIBRARY_PATH" 0 env LD_LIBRARY_PATH=/opt/rocm-x "$TERN" info --devices
has "AMD's library found in LD_LIBRARY_PATH's directory" "^not registered: /opt/rocm-x/libamdocl64\.so \(AMD ROCm's OpenCL driver\)"
rm "$h200/opt/rocm-x/libamdocl64.so"
unset TERN_SYSROOT

# ---- tern doctor ----
# doctor TREE WANT_EXIT ARGS...: doctor --json --no-measure on a tree; the JSON lands in $tmp/out.
doctor() {
    local tree=$1 want=$2
    shift 2
    expect "doctor $* on $(basename "$tree")" "$want" env TERN_SYSROOT="$tree" "$TERN" doctor --json --no-measure "$@"
}
doctor "$h200" 1
json "backend WARN: the unregistered driver" '.checks[1].verdict == "WARN" and .checks[1].numbers.unregistered_gpu_libraries == 1'
json "evidence: the registry and the library" '.checks[1].evidence | test("ICD registry: /etc/OpenCL/vendors \\(1 file: pocl.icd") and contains($nv + " is registered by no .icd")' --arg nv "$NV"
json "fix: the two commands" '.checks[1].fix == "mkdir -p /tmp/icd; echo \($nv) > /tmp/icd/nvidia.icd\nexport OCL_ICD_VENDORS=/tmp/icd   (or, as root: echo \($nv) > /etc/OpenCL/vendors/nvidia.icd)"' --arg nv "$NV"
doctor "$h200" 1 -m "$Q4" --ctx 1024
json "with a model: GPU idle, the same fix first" '.checks[1].verdict == "WARN" and (.checks[1].evidence | test("GPU idle")) and (.checks[1].fix | startswith("mkdir -p /tmp/icd"))'
expect "doctor text on the H200 host" 1 env TERN_SYSROOT="$h200" "$TERN" doctor --no-measure
has "the fix's first line" "^       fix: mkdir -p /tmp/icd; echo $NV > /tmp/icd/nvidia\.icd$"
has "its second line under it" "^            export OCL_ICD_VENDORS=/tmp/icd   \(or, as root: "
expect "doctor with the fix applied" 1 env OCL_ICD_VENDORS=/tmp/icd TERN_SYSROOT="$h200" "$TERN" doctor --json --no-measure
json "OCL_ICD_VENDORS reported, nothing unregistered" '.checks[1].numbers.unregistered_gpu_libraries == 0 and (.checks[1].evidence | test("ICD registry: OCL_ICD_VENDORS=/tmp/icd \\(1 file: nvidia.icd"))'
json "no registration fix then" '.checks[1].fix | test("/tmp/icd") | not'
# the H200 host as it was: this machine's OpenCL runtime, when it lists CPU-type devices only
# (PoCL), as the unregistered NVIDIA driver left it there
if env -u TERN_OPENCL_LIBRARY "$TERN" info --devices 2>/dev/null | grep -q "^auto picks: cpu (no OpenCL GPU"; then
    expect "doctor on the H200 host, PoCL listed" 1 env -u TERN_OPENCL_LIBRARY TERN_SYSROOT="$h200" "$TERN" doctor --json --no-measure -m "$Q4" --ctx 1024
    json "GPU idle: no usable GPU, the ICD fix" '.checks[1].verdict == "WARN" and (.checks[1].evidence | test("no usable GPU device")) and (.checks[1].fix | startswith("mkdir -p /tmp/icd"))'
else
    echo "(this machine's OpenCL lists a GPU or nothing: the PoCL-only case is not run here)"
fi
# a machine with no vendor library: nothing said about registering
doctor tests/data/sysroot/server-8 0 -m "$Q4" --ctx 1024
json "no GPU, no driver: backend OK" '.checks[1].verdict == "OK" and .checks[1].numbers.unregistered_gpu_libraries == 0'

finish icd.sh
