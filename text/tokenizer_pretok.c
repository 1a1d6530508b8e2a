/*
 * The byte-level BPE pre-tokenizers (tokenizer.ggml.pre, formats.md §6.4): a fragment of plain
 * text is cut into the words that BPE then merges within.
 *
 * A pre-tokenizer is a sequence of published regular expressions, applied the way Hugging Face's
 * Split (behavior "Isolated") applies them, and the reference engine after it: each pattern cuts
 * every piece the one before left into its matches and the stretches between them, and sees that
 * piece as the whole text. Most pre-tokenizers are a single pattern whose alternatives match
 * something at every position.
 *
 * The patterns are matched by hand over code points and their Unicode class
 * (tokenizer_unicode.h), not by a regex library: each matcher quotes the expression it
 * implements, tries the alternatives in the pattern's order, and gives characters back where a
 * regex engine's backtracking would. `\s+(?!\S)` leaves the last blank of a run to start the next
 * word.
 */
#include "text/tokenizer_impl.h"
#include "text/tokenizer_unicode.h"

/* ---- a fragment as code points ----------------------------------------------------------------- */

/* Code points with their classes; a matcher sees [0, end), the end of the piece it matches in. */
typedef struct cps_view {
    const uint32_t *cp;
    const uint8_t *cls;
    int32_t end;
} cps_view;

/* Sets of classes, one bit per tern_unicode_class. */
#define CLASS_BIT(c) (1u << (c))
enum {
    SET_LETTER = CLASS_BIT(TERN_UC_LETTER_UPPER) | CLASS_BIT(TERN_UC_LETTER_LOWER) |
                 CLASS_BIT(TERN_UC_LETTER_TITLE) | CLASS_BIT(TERN_UC_LETTER_MODIFIER) |
                 CLASS_BIT(TERN_UC_LETTER_OTHER),
    SET_NUMBER = CLASS_BIT(TERN_UC_NUMBER),
    SET_SPACE = CLASS_BIT(TERN_UC_SPACE),
    SET_PUNCT = CLASS_BIT(TERN_UC_PUNCT),
    /* [^\s\p{L}\p{N}]: marks, punctuation, symbols, controls, invalid bytes */
    SET_OTHER = CLASS_BIT(TERN_UC_OTHER) | CLASS_BIT(TERN_UC_MARK) | CLASS_BIT(TERN_UC_PUNCT),
    /* [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}] and [\p{Ll}\p{Lm}\p{Lo}\p{M}] of gpt-4o and tekken: letters
     * without case (Lm, Lo) and marks belong to both */
    SET_UPPER_LIKE = CLASS_BIT(TERN_UC_LETTER_UPPER) | CLASS_BIT(TERN_UC_LETTER_TITLE) |
                     CLASS_BIT(TERN_UC_LETTER_MODIFIER) | CLASS_BIT(TERN_UC_LETTER_OTHER) |
                     CLASS_BIT(TERN_UC_MARK),
    SET_LOWER_LIKE = CLASS_BIT(TERN_UC_LETTER_LOWER) | CLASS_BIT(TERN_UC_LETTER_MODIFIER) |
                     CLASS_BIT(TERN_UC_LETTER_OTHER) | CLASS_BIT(TERN_UC_MARK),
};

static bool in(const cps_view *v, int32_t i, uint32_t set) {
    return i < v->end && ((set >> v->cls[i]) & 1u);
}
static bool is_cp(const cps_view *v, int32_t i, uint32_t c) {
    return i < v->end && v->cp[i] == c;
}
static bool is_newline(const cps_view *v, int32_t i) {
    return is_cp(v, i, '\r') || is_cp(v, i, '\n');
}

static int32_t run_of(const cps_view *v, int32_t i, uint32_t set) {
    while (in(v, i, set))
        i++;
    return i;
}

/* ---- the word patterns: a match at every position ---------------------------------------------- */

static uint32_t fold_ascii(uint32_t c) {
    return c >= 'A' && c <= 'Z' ? c + 32 : c;
}

/* 's|'t|'re|'ve|'m|'ll|'d, optionally case-insensitive (ASCII, as the reference engine spells
 * it out): the length matched, or 0. */
static int32_t contraction(const cps_view *v, int32_t pos, bool any_case) {
    if (!is_cp(v, pos, '\'') || pos + 1 >= v->end)
        return 0;
    const uint32_t a = any_case ? fold_ascii(v->cp[pos + 1]) : v->cp[pos + 1];
    if (a == 's' || a == 't' || a == 'm' || a == 'd')
        return 2;
    if (pos + 2 >= v->end)
        return 0;
    const uint32_t b = any_case ? fold_ascii(v->cp[pos + 2]) : v->cp[pos + 2];
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l'))
        return 3;
    return 0;
}

/* \s+(?!\S)|\s+ at a blank: the whole run at the end of the text, else the run less its last blank
 * (which then leads the next word), else a single blank. */
static int32_t blank_run(const cps_view *v, int32_t pos) {
    const int32_t e = run_of(v, pos, SET_SPACE);
    if (e == v->end || e - pos == 1)
        return e;
    return e - 1;
}

/* gpt-2: 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ */
static int32_t match_gpt2(const cps_view *v, int32_t pos) {
    const int32_t c = contraction(v, pos, false);
    if (c > 0)
        return pos + c;
    const int32_t p = is_cp(v, pos, ' ') ? pos + 1 : pos; /* the optional leading space */
    if (in(v, p, SET_LETTER))
        return run_of(v, p, SET_LETTER);
    if (in(v, p, SET_NUMBER))
        return run_of(v, p, SET_NUMBER);
    if (in(v, p, SET_OTHER))
        return run_of(v, p, SET_OTHER);
    return blank_run(v, pos); /* every other class is handled above: pos is a blank */
}

/* The alternatives that llama3's, gpt-4o's and tekken's patterns end with, once their letter
 * alternatives found nothing at pos:
 *   \p{N}{1,max_digits}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
 * gpt-4o and tekken write [\r\n/]* after the punctuation (slash). */
static int32_t match_tail(const cps_view *v, int32_t pos, int32_t max_digits, bool slash) {
    if (in(v, pos, SET_NUMBER)) {
        int32_t e = pos;
        while (e - pos < max_digits && in(v, e, SET_NUMBER))
            e++;
        return e;
    }
    const int32_t p = is_cp(v, pos, ' ') ? pos + 1 : pos;
    if (in(v, p, SET_OTHER)) {
        int32_t e = run_of(v, p, SET_OTHER);
        while (is_newline(v, e) || (slash && is_cp(v, e, '/')))
            e++;
        return e;
    }
    /* Only a blank is left. \s*[\r\n]+ takes its run up to the last newline, if it has one. */
    int32_t last_newline = -1;
    for (int32_t i = pos; in(v, i, SET_SPACE); i++)
        if (is_newline(v, i))
            last_newline = i;
    if (last_newline >= 0)
        return last_newline + 1;
    return blank_run(v, pos);
}

/* llama3: (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|
 *         \s*[\r\n]+|\s+(?!\S)|\s+
 * qwen2: the same with \p{N} instead of \p{N}{1,3} (max_digits 1). */
static int32_t match_llama3(const cps_view *v, int32_t pos, int32_t max_digits) {
    const int32_t c = contraction(v, pos, true);
    if (c > 0)
        return pos + c;
    if (in(v, pos, SET_LETTER))
        return run_of(v, pos, SET_LETTER);
    if (!in(v, pos, SET_NUMBER) && !is_newline(v, pos) && in(v, pos + 1, SET_LETTER))
        return run_of(v, pos + 1, SET_LETTER);
    return match_tail(v, pos, max_digits, false);
}

/* [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+ from p: where it ends, or -1. The
 * first class takes its whole run; when nothing of the second follows, it gives characters back
 * until the second can take one, which is the last of the run that is in both. */
static int32_t lower_word_end(const cps_view *v, int32_t p) {
    const int32_t u = run_of(v, p, SET_UPPER_LIKE);
    if (in(v, u, SET_LOWER_LIKE))
        return run_of(v, u, SET_LOWER_LIKE);
    for (int32_t k = u - 1; k >= p; k--)
        if (in(v, k, SET_LOWER_LIKE))
            return k + 1;
    return -1;
}

/* [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]* from p: where it ends, or -1. */
static int32_t upper_word_end(const cps_view *v, int32_t p) {
    if (!in(v, p, SET_UPPER_LIKE))
        return -1;
    return run_of(v, run_of(v, p, SET_UPPER_LIKE), SET_LOWER_LIKE);
}

/* gpt-4o (o200k):
 *   [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|
 *   [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|
 *   \p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
 * tekken: the same without the contractions, and \p{N} for \p{N}{1,3}.
 * A word is capitals then small letters, so "CamelCase" is "Camel", "Case" and "HTTPServer" one
 * word; an all-capital word is the second alternative. */
static int32_t match_cased(const cps_view *v, int32_t pos, bool contractions, int32_t max_digits) {
    /* The optional first character: anything but a letter, a number or a newline. A mark is
     * one, and may also start the word itself when taking it first leads nowhere. */
    const bool lead = !in(v, pos, SET_LETTER | SET_NUMBER) && !is_newline(v, pos);
    int32_t e = lead ? lower_word_end(v, pos + 1) : -1;
    if (e < 0)
        e = lower_word_end(v, pos);
    if (e < 0 && lead)
        e = upper_word_end(v, pos + 1);
    if (e < 0)
        e = upper_word_end(v, pos);
    if (e >= 0)
        return contractions ? e + contraction(v, e, true) : e;
    return match_tail(v, pos, max_digits, true);
}

/* ---- the patterns that isolate runs ------------------------------------------------------------ */

/* Does code point i (< end) belong to the pattern's character class? */
typedef bool (*member_fn)(const cps_view *v, int32_t i);

typedef struct cp_range {
    uint32_t first, last;
} cp_range;

static bool in_ranges(const cp_range *r, size_t n, uint32_t c) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        const size_t mid = lo + (hi - lo) / 2;
        if (c < r[mid].first)
            hi = mid;
        else if (c > r[mid].last)
            lo = mid + 1;
        else
            return true;
    }
    return false;
}

/* deepseek-llm's letters, [A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓ ... 𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃]: an explicit list
 * of cased letters (Lu, Ll, Lt) of some scripts, so Armenian small letters, for one, are not in it.
 * Neighbouring ranges of the pattern are joined. */
static const cp_range deepseek_cased[] = {
    {0x41, 0x5A},       {0x61, 0x7A},       {0xB5, 0xB5},       {0xC0, 0xD6},       {0xD8, 0xF6},
    {0xF8, 0x1BA},      {0x1BC, 0x1BF},     {0x1C4, 0x293},     {0x295, 0x2AF},     {0x370, 0x373},
    {0x376, 0x377},     {0x37B, 0x37D},     {0x37F, 0x37F},     {0x386, 0x386},     {0x388, 0x38A},
    {0x38C, 0x38C},     {0x38E, 0x3A1},     {0x3A3, 0x3F5},     {0x3F7, 0x481},     {0x48A, 0x52F},
    {0x531, 0x556},     {0x10A0, 0x10C5},   {0x13A0, 0x13F5},   {0x13F8, 0x13FD},   {0x1C90, 0x1CBA},
    {0x1CBD, 0x1CBF},   {0x1D00, 0x1D2B},   {0x1D6B, 0x1D77},   {0x1D79, 0x1D9A},   {0x1E00, 0x1F15},
    {0x1F18, 0x1F1D},   {0x1F20, 0x1F45},   {0x1F48, 0x1F4D},   {0x1F50, 0x1F57},   {0x1F59, 0x1F59},
    {0x1F5B, 0x1F5B},   {0x1F5D, 0x1F5D},   {0x1F5F, 0x1F7D},   {0x1F80, 0x1FB4},   {0x1FB6, 0x1FBC},
    {0x1FBE, 0x1FBE},   {0x1FC2, 0x1FC4},   {0x1FC6, 0x1FCC},   {0x1FD0, 0x1FD3},   {0x1FD6, 0x1FDB},
    {0x1FE0, 0x1FEC},   {0x1FF2, 0x1FF4},   {0x1FF6, 0x1FFC},   {0x2102, 0x2102},   {0x2107, 0x2107},
    {0x210A, 0x2113},   {0x2115, 0x2115},   {0x2119, 0x211D},   {0x2124, 0x2124},   {0x2126, 0x2126},
    {0x2128, 0x2128},   {0x212A, 0x212D},   {0x212F, 0x2134},   {0x2139, 0x2139},   {0x213C, 0x213F},
    {0x2145, 0x2149},   {0x214E, 0x214E},   {0x2183, 0x2184},   {0x2C00, 0x2C7B},   {0x2C7E, 0x2CE4},
    {0x2CEB, 0x2CEE},   {0x2CF2, 0x2CF3},   {0xA640, 0xA66D},   {0xA680, 0xA69B},   {0xA722, 0xA76F},
    {0xA771, 0xA787},   {0xA78B, 0xA78E},   {0xAB70, 0xABBF},   {0xFB00, 0xFB06},   {0xFB13, 0xFB17},
    {0xFF21, 0xFF3A},   {0xFF41, 0xFF5A},   {0x10400, 0x1044F}, {0x104B0, 0x104D3}, {0x104D8, 0x104FB},
    {0x10C80, 0x10CB2}, {0x10CC0, 0x10CF2}, {0x118A0, 0x118DF}, {0x1E900, 0x1E943},
};

/* deepseek-llm's punctuation, [!-/:-~！-／：-～‘-‟　-。]: ASCII from '!' to '~' without the digits
 * (so the ASCII letters too), the same in full width, curly quotes, the ideographic space, comma
 * and full stop. */
static const cp_range deepseek_punct[] = {
    {0x21, 0x2F}, {0x3A, 0x7E}, {0x2018, 0x201F}, {0x3000, 0x3002}, {0xFF01, 0xFF0F}, {0xFF1A, 0xFF5E},
};

/* Both DeepSeek's [一-龥ࠀ-一가-퟿]: the CJK ideographs to U+9FA5 and everything from U+0800 up to
 * them (Indic and South-East Asian scripts, kana, CJK punctuation, most symbols), and Hangul. */
static const cp_range deepseek_cjk[] = {{0x800, 0x9FA5}, {0xAC00, 0xD7FF}};

static bool is_deepseek_cased(const cps_view *v, int32_t i) {
    return in_ranges(deepseek_cased, sizeof deepseek_cased / sizeof deepseek_cased[0], v->cp[i]);
}
static bool is_deepseek_punct(const cps_view *v, int32_t i) {
    return in_ranges(deepseek_punct, sizeof deepseek_punct / sizeof deepseek_punct[0], v->cp[i]);
}
static bool is_deepseek_cjk(const cps_view *v, int32_t i) {
    return in_ranges(deepseek_cjk, sizeof deepseek_cjk / sizeof deepseek_cjk[0], v->cp[i]);
}
static bool is_letter(const cps_view *v, int32_t i) {
    return in(v, i, SET_LETTER);
}
static bool is_number(const cps_view *v, int32_t i) {
    return in(v, i, SET_NUMBER);
}
static bool is_punct(const cps_view *v, int32_t i) {
    return in(v, i, SET_PUNCT);
}
static bool is_newline_at(const cps_view *v, int32_t i) {
    return is_newline(v, i);
}
/* falcon's first pattern, [\p{P}\$\+<=>\^~\|`]+: punctuation and these ASCII symbols. */
static bool is_falcon_isolated(const cps_view *v, int32_t i) {
    const uint32_t c = v->cp[i];
    return in(v, i, SET_PUNCT) || c == '$' || c == '+' || c == '<' || c == '=' || c == '>' || c == '^' ||
           c == '~' || c == '|' || c == '`';
}

static int32_t run_while(const cps_view *v, int32_t i, member_fn x) {
    while (i < v->end && x(v, i))
        i++;
    return i;
}

/* X (single) or X+ for the class x: the leftmost match at or after pos. */
static bool find_class(const cps_view *v, int32_t pos, member_fn x, bool single, int32_t *start,
                       int32_t *stop) {
    for (int32_t q = pos; q < v->end; q++) {
        if (x(v, q)) {
            *start = q;
            *stop = single ? q + 1 : run_while(v, q, x);
            return true;
        }
    }
    return false;
}

/* \s?X+: at each position the blank is tried first, then X+ on its own. */
static bool find_blank_class(const cps_view *v, int32_t pos, member_fn x, int32_t *start, int32_t *stop) {
    for (int32_t q = pos; q < v->end; q++) {
        int32_t from = -1;
        if (in(v, q, SET_SPACE) && q + 1 < v->end && x(v, q + 1))
            from = q + 1;
        else if (x(v, q))
            from = q;
        if (from >= 0) {
            *start = q;
            *stop = run_while(v, from, x);
            return true;
        }
    }
    return false;
}

/* \s+$: the run of blanks that ends the piece. The pieces this sees hold no newline ([\r\n] came
 * first), so $ is the end of the piece. */
static bool find_trailing_blanks(const cps_view *v, int32_t pos, int32_t *start, int32_t *stop) {
    int32_t b = v->end;
    while (b > pos && in(v, b - 1, SET_SPACE))
        b--;
    *start = b;
    *stop = v->end;
    return b < v->end;
}

static bool ascii_digit(const cps_view *v, int32_t i) {
    return i < v->end && v->cp[i] >= '0' && v->cp[i] <= '9';
}

/* falcon's last pattern, [0-9][0-9][0-9]: leftmost runs of three ASCII digits. */
static bool find_digit_triple(const cps_view *v, int32_t pos, int32_t *start, int32_t *stop) {
    for (int32_t q = pos; q + 3 <= v->end; q++) {
        if (ascii_digit(v, q) && ascii_digit(v, q + 1) && ascii_digit(v, q + 2)) {
            *start = q;
            *stop = q + 3;
            return true;
        }
    }
    return false;
}

/* ---- pre-tokenizers as sequences of patterns --------------------------------------------------- */

typedef enum pattern {
    PAT_GPT2,            /* match_gpt2 */
    PAT_LLAMA3,          /* match_llama3, digits by up to 3 */
    PAT_QWEN2,           /* match_llama3, single digits */
    PAT_GPT4O,           /* match_cased with contractions, digits by up to 3 */
    PAT_TEKKEN,          /* match_cased, single digits */
    PAT_EACH_NUMBER,     /* \p{N} */
    PAT_NUMBERS,         /* \p{N}+ */
    PAT_NEWLINE,         /* [\r\n] */
    PAT_LETTERS,         /* \s?\p{L}+ */
    PAT_PUNCT,           /* \s?\p{P}+ */
    PAT_FALCON_PUNCT,    /* [\p{P}\$\+<=>\^~\|`]+ */
    PAT_DIGIT_TRIPLES,   /* [0-9][0-9][0-9] */
    PAT_DEEPSEEK_CASED,  /* \s?[A-Za-zµÀ-Ö ...]+ */
    PAT_DEEPSEEK_PUNCT,  /* \s?[!-/:-~！-／：-～‘-‟　-。]+ */
    PAT_TRAILING_BLANKS, /* \s+$ */
    PAT_DEEPSEEK_CJK,    /* [一-龥ࠀ-一가-퟿]+ */
} pattern;

#define MAX_PATTERNS 6

/* Indexed by tern_tok_pre. */
static const struct {
    uint8_t n;
    uint8_t pattern[MAX_PATTERNS];
} sequences[] = {
    [TERN_PRE_GPT2] = {1, {PAT_GPT2}},
    [TERN_PRE_LLAMA3] = {1, {PAT_LLAMA3}},
    [TERN_PRE_QWEN2] = {1, {PAT_QWEN2}},
    [TERN_PRE_STARCODER] = {2, {PAT_EACH_NUMBER, PAT_GPT2}},
    /* falcon's second pattern lacks the final |\s+, but a blank it leaves unmatched becomes a
     * piece of its own all the same, so the gpt-2 matcher serves */
    [TERN_PRE_FALCON] = {3, {PAT_FALCON_PUNCT, PAT_GPT2, PAT_DIGIT_TRIPLES}},
    [TERN_PRE_DEEPSEEK_LLM] = {6,
                               {PAT_NEWLINE, PAT_DEEPSEEK_CASED, PAT_DEEPSEEK_PUNCT, PAT_TRAILING_BLANKS,
                                PAT_DEEPSEEK_CJK, PAT_NUMBERS}},
    /* the last is Hugging Face's Digits(individual_digits), which isolates each \p{N} */
    [TERN_PRE_DEEPSEEK_CODER] = {5, {PAT_NEWLINE, PAT_LETTERS, PAT_PUNCT, PAT_DEEPSEEK_CJK, PAT_EACH_NUMBER}},
    [TERN_PRE_GPT4O] = {1, {PAT_GPT4O}},
    [TERN_PRE_TEKKEN] = {1, {PAT_TEKKEN}},
};

/* The leftmost match of pattern p in [pos, v->end): true with it in [*start, *stop). */
static bool find_match(pattern p, const cps_view *v, int32_t pos, int32_t *start, int32_t *stop) {
    *start = pos;
    switch (p) {
    case PAT_GPT2:
        *stop = match_gpt2(v, pos);
        return true;
    case PAT_LLAMA3:
        *stop = match_llama3(v, pos, 3);
        return true;
    case PAT_QWEN2:
        *stop = match_llama3(v, pos, 1);
        return true;
    case PAT_GPT4O:
        *stop = match_cased(v, pos, true, 3);
        return true;
    case PAT_TEKKEN:
        *stop = match_cased(v, pos, false, 1);
        return true;
    case PAT_EACH_NUMBER:
        return find_class(v, pos, is_number, true, start, stop);
    case PAT_NUMBERS:
        return find_class(v, pos, is_number, false, start, stop);
    case PAT_NEWLINE:
        return find_class(v, pos, is_newline_at, true, start, stop);
    case PAT_LETTERS:
        return find_blank_class(v, pos, is_letter, start, stop);
    case PAT_PUNCT:
        return find_blank_class(v, pos, is_punct, start, stop);
    case PAT_FALCON_PUNCT:
        return find_class(v, pos, is_falcon_isolated, false, start, stop);
    case PAT_DIGIT_TRIPLES:
        return find_digit_triple(v, pos, start, stop);
    case PAT_DEEPSEEK_CASED:
        return find_blank_class(v, pos, is_deepseek_cased, start, stop);
    case PAT_DEEPSEEK_PUNCT:
        return find_blank_class(v, pos, is_deepseek_punct, start, stop);
    case PAT_TRAILING_BLANKS:
        return find_trailing_blanks(v, pos, start, stop);
    case PAT_DEEPSEEK_CJK:
        return find_class(v, pos, is_deepseek_cjk, false, start, stop);
    }
    return false;
}

typedef struct split_ctx {
    const char *text;
    const uint32_t *cp;
    const uint8_t *cls;
    const int32_t *offs; /* byte offset of each code point, and of the end */
    const uint8_t *patterns;
    int n_patterns;
    tern_tok_word_fn fn;
    void *ctx;
    tern_error *err;
} split_ctx;

/* Cuts code points [start, end) by pattern k and hands each piece to pattern k + 1; past the last
 * pattern a piece is a word. */
static tern_status split_piece(const split_ctx *c, int k, int32_t start, int32_t end) {
    if (k == c->n_patterns)
        return c->fn(c->ctx, c->text + c->offs[start], (size_t)(c->offs[end] - c->offs[start]), c->err);
    const cps_view v = {c->cp, c->cls, end};
    tern_status st = TERN_OK;
    for (int32_t pos = start; pos < end && st == TERN_OK;) {
        int32_t m_start, m_stop;
        if (!find_match((pattern)c->patterns[k], &v, pos, &m_start, &m_stop))
            return split_piece(c, k + 1, pos, end);
        TERN_ASSERT(m_start >= pos && m_stop > m_start && m_stop <= end);
        if (m_start > pos) /* the stretch before the match */
            st = split_piece(c, k + 1, pos, m_start);
        if (st == TERN_OK)
            st = split_piece(c, k + 1, m_start, m_stop);
        pos = m_stop;
    }
    return st;
}

tern_status tern_tok_bpe_split(const tern_tokenizer *t, const char *text, size_t len, tern_tok_scratch *sc,
                               tern_tok_word_fn fn, void *ctx, tern_error *err) {
    if (len == 0)
        return TERN_OK;
    TERN_ASSERT((size_t)t->pre < sizeof sequences / sizeof sequences[0] && sequences[t->pre].n > 0);
    tern_status st = tern_tok_reserve_cps(sc, len, err);
    if (st != TERN_OK)
        return st;
    int32_t n = 0;
    for (size_t i = 0; i < len; n++) {
        uint32_t cp;
        const size_t clen = tern_utf8_decode((const uint8_t *)text + i, len - i, &cp);
        sc->cps[n] = cp;
        sc->cls[n] = (uint8_t)((cp & TERN_UNICODE_INVALID) ? TERN_UC_OTHER : tern_unicode_class_of(cp));
        sc->offs[n] = (int32_t)i;
        i += clen;
    }
    sc->offs[n] = (int32_t)len;
    const split_ctx c = {text, sc->cps, sc->cls, sc->offs, sequences[t->pre].pattern, sequences[t->pre].n,
                         fn,   ctx,     err};
    return split_piece(&c, 0, 0, n);
}
