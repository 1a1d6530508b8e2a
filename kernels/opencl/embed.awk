# Turns OpenCL sources into C string literals (kernels/opencl/gen.mk runs it at build time).
#
#   awk -f kernels/opencl/embed.awk a.cl b.cl ... > sources.c
#
# Each file becomes one string of tern_cl_sources[], named in tern_cl_source_names[]. A line
# `#include "path"` (path from the repository root, as the C code writes it) is replaced by that
# file, recursively and once per source, so the kernels can include the quant/block_*.h layouts
# the C code uses and the program builds without any include path on the device.

function fail(msg) {
    print "embed.awk: " msg > "/dev/stderr"
    failed = 1
    exit 1
}

function emit(line) {
    gsub(/\\/, "&&", line)
    gsub(/"/, "\\\\&", line)
    gsub(/\t/, "    ", line)
    printf "    \"%s\\n\"\n", line
}

function inline_file(path,    line, inc, rc) {
    if (path in seen)
        return
    seen[path] = 1
    while ((rc = (getline line < path)) > 0) {
        if (line ~ /^[ \t]*#[ \t]*include[ \t]*"[^"]+"/) {
            inc = line
            sub(/^[^"]*"/, "", inc)
            sub(/".*$/, "", inc)
            inline_file(inc)
        } else {
            emit(line)
        }
    }
    if (rc < 0)
        fail("cannot read " path)
    close(path)
}

BEGIN {
    print "/* Generated from the kernels/opencl .cl files by kernels/opencl/embed.awk: do not edit. */"
    print "#include \"kernels/opencl/cl_sources.h\""
    print ""
    print "const char *const tern_cl_sources[] = {"
    for (i = 1; i < ARGC; i++) {
        delete seen
        inline_file(ARGV[i])
        print "    ,"
    }
    print "};"
    print ""
    print "const char *const tern_cl_source_names[] = {"
    for (i = 1; i < ARGC; i++) {
        name = ARGV[i]
        sub(/^.*\//, "", name)
        printf "    \"%s\",\n", name
    }
    print "};"
    print ""
    printf "const int tern_cl_n_sources = %d;\n", ARGC - 1
    exit 0
}
