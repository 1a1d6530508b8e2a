#!/usr/bin/env bash
# The rooms' dependency rule (docs/layout.md): every #include points to the file's own room or one
# below it, tools/ reaches the library only through include/tern_internal.h, and no two files of
# the library or of tools/ use each other's symbols (over the objects of $BUILD). tests/sh/layers.py
# holds the table of rooms and does the work.
set -u
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
command -v python3 >/dev/null || { echo "skip: no python3"; exit 0; }
python3 tests/sh/layers.py "$BUILD"
