# Generates the Unicode class table the byte-level BPE pre-tokenizers need: letters by sub-category
# (\p{Lu}, \p{Ll}, \p{Lt}, \p{Lm}, \p{Lo}: gpt-4o's and tekken's patterns tell them apart), marks
# (\p{M}), \p{N}, \s and \p{P}.
#
#   awk -f text/gen_unicode.awk /usr/share/unicode/PropList.txt /usr/share/unicode/UnicodeData.txt
#
# PropList.txt must come first: it gives the White_Space property, which UnicodeData.txt does
# not carry. UnicodeData.txt gives the general category of every assigned code point; a pair of
# "<..., First>" / "<..., Last>" lines stands for the whole range between them. Code points are
# listed in increasing order, so runs of one class are merged into ranges as they are read.
# Only POSIX awk is used (Debian's default awk is mawk).

function hex(s,    i, v) {
    v = 0
    s = toupper(s)
    for (i = 1; i <= length(s); i++)
        v = v * 16 + index("0123456789ABCDEF", substr(s, i, 1)) - 1
    return v
}

function flush() {
    if (run_class != 0) {
        printf "    {0x%X, 0x%X, %s},\n", run_first, run_last, name[run_class]
        n_ranges++
    }
    run_class = 0
}

# Adds first..last (inclusive) of class c, extending the current run when it continues it.
function add(first, last, c) {
    if (c == run_class && first == run_last + 1) {
        run_last = last
        return
    }
    flush()
    run_class = c
    run_first = first
    run_last = last
}

BEGIN {
    FS = ";"
    name[1] = "TERN_UC_LETTER_UPPER"
    name[2] = "TERN_UC_LETTER_LOWER"
    name[3] = "TERN_UC_LETTER_TITLE"
    name[4] = "TERN_UC_LETTER_MODIFIER"
    name[5] = "TERN_UC_LETTER_OTHER"
    name[6] = "TERN_UC_MARK"
    name[7] = "TERN_UC_NUMBER"
    name[8] = "TERN_UC_SPACE"
    name[9] = "TERN_UC_PUNCT"
    letter["Lu"] = 1
    letter["Ll"] = 2
    letter["Lt"] = 3
    letter["Lm"] = 4
    letter["Lo"] = 5
    run_class = 0
    n_ranges = 0
    print "/* Generated at build time by text/gen_unicode.awk from Debian's unicode-data"
    print " * (PropList.txt, UnicodeData.txt). Do not edit. */"
    print "#include \"text/tokenizer_unicode.h\""
    print ""
    print "const tern_unicode_range tern_unicode_ranges[] = {"
}

# PropList.txt: "0009..000D    ; White_Space # ..."
FNR == NR {
    if ($0 ~ /^[0-9A-Fa-f]/ && $2 ~ /^ *White_Space *(#|$)/) {
        field = $1
        gsub(/[ \t]/, "", field)
        n = split(field, bounds, /\.\./)
        lo = hex(bounds[1])
        hi = (n == 2) ? hex(bounds[2]) : lo
        for (cp = lo; cp <= hi; cp++) space[cp] = 1
    }
    next
}

# UnicodeData.txt: "0041;LATIN CAPITAL LETTER A;Lu;..."
{
    cp = hex($1)
    cat = $3
    c = 0
    if (cp in space) c = 8
    else if (cat in letter) c = letter[cat]
    else if (cat ~ /^M/) c = 6
    else if (cat ~ /^N/) c = 7
    else if (cat ~ /^P/) c = 9
    if ($2 ~ /, First>$/) { range_first = cp; next }
    if ($2 ~ /, Last>$/) { add(range_first, cp, c); next }
    add(cp, cp, c)
}

END {
    flush()
    print "};"
    print ""
    printf "const size_t tern_unicode_range_count = %d;\n", n_ranges
}
