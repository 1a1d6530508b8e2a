/*
 * Private to text/tokenizer*.c: the tokenizer's layout and the pieces its two models share
 * (the hash index, the merge loop over a symbol list, the output sink).
 */
#ifndef TERN_TOKENIZER_IMPL_H
#define TERN_TOKENIZER_IMPL_H

#include "text/tokenizer.h"

/* tokenizer.ggml.token_type values (formats.md §6.1). */
enum {
    TERN_TOKEN_UNDEFINED = 0,
    TERN_TOKEN_NORMAL = 1,
    TERN_TOKEN_UNKNOWN = 2,
    TERN_TOKEN_CONTROL = 3,
    TERN_TOKEN_USER_DEFINED = 4,
    TERN_TOKEN_UNUSED = 5,
    TERN_TOKEN_BYTE = 6,
};

/* tern_tok_token.flags */
enum {
    TERN_TOKF_EOG = 1u << 0,           /* ends generation */
    TERN_TOKF_HIDDEN = 1u << 1,        /* piece shown only on request (control, unknown) */
    TERN_TOKF_MATCH_ALWAYS = 1u << 2,  /* its text in user input becomes this token */
    TERN_TOKF_MATCH_SPECIAL = 1u << 3, /* ... only when the caller parses special tokens */
};

typedef enum tern_tok_model { TERN_TOK_SPM, TERN_TOK_BPE } tern_tok_model;

/* Byte-level BPE pre-tokenizers (formats.md §6.4). */
typedef enum tern_tok_pre {
    TERN_PRE_GPT2,         /* gpt-2 / default */
    TERN_PRE_LLAMA3,       /* llama-bpe, llama3: case-insensitive contractions, digits by 3 */
    TERN_PRE_QWEN2,        /* the llama3 pattern with single digits */
    TERN_PRE_STARCODER,    /* smollm, starcoder, refact, exaone: every digit alone, then the gpt-2 pattern */
    TERN_PRE_FALCON,       /* runs of punctuation alone, then the gpt-2 pattern, then ASCII digits by 3 */
    TERN_PRE_DEEPSEEK_LLM, /* six patterns: newlines, listed cased letters, ASCII-ish punctuation,
                              trailing blanks, CJK and more, numbers */
    TERN_PRE_DEEPSEEK_CODER, /* newlines, letters, punctuation, CJK and more, each digit */
    TERN_PRE_GPT4O,          /* words split at lower-to-upper case, contractions attached, digits by 3 */
    TERN_PRE_TEKKEN,         /* the gpt-4o pattern without contractions, single digits; ignore_merges */
} tern_tok_pre;

typedef struct tern_tok_token {
    uint32_t text_off; /* the token's text in tern_tokenizer.text */
    uint32_t text_len;
    uint32_t piece_off; /* the bytes it decodes to, in tern_tokenizer.pieces */
    uint32_t piece_len;
    float score; /* SPM merge priority; 0 when the file has no scores */
    uint8_t type;
    uint8_t flags;
} tern_tok_token;

/* Open-addressing hash index from keys to item numbers. The keys themselves live with the
 * caller, which supplies the comparison, so one index type serves token texts, merge pairs and
 * special-token texts. */
typedef struct tern_tok_index {
    uint32_t *hashes;
    int32_t *items; /* -1 = empty slot */
    size_t mask;    /* capacity - 1; the capacity is a power of two, at least twice the items */
} tern_tok_index;

/* Does item hold the key (key, len)? */
typedef bool (*tern_tok_key_eq)(const void *ctx, int32_t item, const void *key, size_t len);

/* The index (tokenizer_index.c). */
uint32_t tern_tok_hash(const void *key, size_t len);
tern_status tern_tok_index_init(tern_tok_index *ix, size_t n_items, tern_error *err);
void tern_tok_index_free(tern_tok_index *ix);
/* Item holding the key, or -1. */
int32_t tern_tok_index_find(const tern_tok_index *ix, const void *key, size_t len, tern_tok_key_eq eq,
                            const void *ctx);
/* Adds item under the key unless the key is present already; returns whether it was added. The
 * index must have been sized for every item added. */
bool tern_tok_index_add(tern_tok_index *ix, const void *key, size_t len, int32_t item, tern_tok_key_eq eq,
                        const void *ctx);

typedef struct tern_tok_merge {
    int32_t left, right; /* token ids; the merge's rank is its position in the array */
    int32_t result;      /* id of the joined text, or -1 when the vocabulary lacks it */
} tern_tok_merge;

struct tern_tokenizer {
    tern_tok_model model;
    tern_tok_pre pre;
    char pre_name[32]; /* as the file spells it (BPE) */
    int32_t n_vocab;
    tern_tok_token *tokens;
    char *text;   /* every token's text, back to back */
    char *pieces; /* every token's decoded bytes, back to back */
    uint32_t max_piece_len;
    tern_tok_index vocab; /* token text -> id (the highest id when texts repeat) */

    tern_tok_merge *merges; /* BPE only, by rank */
    int32_t n_merges;
    tern_tok_index merge_index; /* (left, right) as two int32 -> rank */

    /* SPM: the <0xXX> token of each byte (-1: none). BPE: the token of each byte's one-character
     * text in the GPT-2 byte alphabet. */
    int32_t byte_token[256];

    /* Tokens whose text is cut out of user input before the model's algorithm runs. */
    tern_tok_index special_index;
    uint32_t *special_lens; /* distinct text lengths of those tokens, longest first */
    size_t n_special_lens;
    uint8_t special_first[32]; /* bitmap of their first bytes */

    int32_t bos, eos, unk;
    bool add_bos;
    bool add_space_prefix; /* SPM */
    bool ignore_merges;    /* BPE: a word that is a whole token is emitted as is (llama3, tekken) */
    char warning[TERN_ERROR_MESSAGE_MAX];
};

/* Text of token id (id in range). */
static inline const char *tern_tok_text(const tern_tokenizer *t, int32_t id, size_t *len) {
    *len = t->tokens[id].text_len;
    return t->text + t->tokens[id].text_off;
}

/* May the models produce this token from plain text? Control, unknown and byte tokens come
 * only from special-text matching and byte fallback, never from merging or whole-word lookup:
 * otherwise user text spelling "</s>" could merge into the real end-of-sequence token. */
static inline bool tern_tok_mergeable(const tern_tokenizer *t, int32_t id) {
    const uint8_t type = t->tokens[id].type;
    return type != TERN_TOKEN_CONTROL && type != TERN_TOKEN_UNKNOWN && type != TERN_TOKEN_BYTE;
}

/* tern_tok_key_eq for indexes of token ids keyed by their text (ctx is the tokenizer). */
bool tern_tok_text_eq(const void *ctx, int32_t item, const void *key, size_t len);
/* Id of a token text, or -1. */
int32_t tern_tok_lookup(const tern_tokenizer *t, const char *text, size_t len);

/* Where tokens go: counted past cap so the caller learns how many are needed. */
typedef struct tern_tok_sink {
    int32_t *out;
    size_t cap;
    size_t n;
} tern_tok_sink;

static inline void tern_tok_emit(tern_tok_sink *s, int32_t id) {
    if (s->n < s->cap)
        s->out[s->n] = id;
    s->n++;
}

/* One symbol of the merge loop: bytes [start, start+len) of the text being merged, linked to its
 * neighbours; len 0 once merged into its left neighbour. */
typedef struct tern_tok_symbol {
    int32_t start, len;
    int32_t prev, next; /* -1 at the ends */
    int32_t id;         /* token of the symbol's text, or -1 */
} tern_tok_symbol;

/* A candidate merge of symbols left and right (adjacent when queued). */
typedef struct tern_tok_cand {
    double priority; /* highest first; ties go to the lower left index */
    int32_t left, right;
    int32_t size;   /* left.len + right.len when queued: a mismatch later means it is stale */
    int32_t result; /* token id of the merged symbol */
} tern_tok_cand;

/* Buffers of one encode call, grown on demand to the largest fragment or word seen. */
typedef struct tern_tok_scratch {
    tern_tok_symbol *sym;
    size_t sym_cap;
    tern_tok_cand *heap; /* 3 per symbol: the first pairs, then at most 2 per merge */
    size_t heap_cap, heap_n;
    char *buf; /* SentencePiece-escaped or byte-mapped text */
    size_t buf_cap;
    uint32_t *cps; /* BPE: code points of a fragment ... */
    uint8_t *cls;  /* ... their Unicode classes ... */
    int32_t *offs; /* ... and their byte offsets (one more than code points) */
    size_t cp_cap;
} tern_tok_scratch;

/* The scratch buffers and the merge loop (tokenizer_merge.c). */

/* Makes room for n symbols (and their candidate pairs). */
tern_status tern_tok_reserve_symbols(tern_tok_scratch *sc, size_t n, tern_error *err);
/* Makes room for n bytes in sc->buf. */
tern_status tern_tok_reserve_buf(tern_tok_scratch *sc, size_t n, tern_error *err);
/* Makes room for n code points (and n + 1 offsets). */
tern_status tern_tok_reserve_cps(tern_tok_scratch *sc, size_t n, tern_error *err);
/* Frees what the reserve calls allocated (sc itself is the caller's). */
void tern_tok_scratch_free(tern_tok_scratch *sc);

/* The model's rule for a pair of adjacent symbols: whether they may merge, with what priority
 * and into which token. */
typedef bool (*tern_tok_pair_fn)(const tern_tokenizer *t, const char *text, const tern_tok_symbol *l,
                                 const tern_tok_symbol *r, double *priority, int32_t *result);

/* Merges sc->sym[0..n) (already linked, with ids) by repeatedly taking the best candidate pair,
 * as both SPM and BPE do; text holds the bytes the symbols index. */
void tern_tok_merge_all(const tern_tokenizer *t, tern_tok_scratch *sc, const char *text, int32_t n,
                        tern_tok_pair_fn pair);

/* Model algorithms over one fragment of plain text (special tokens already cut out).
 * space_prefix: SPM's add_space_prefix applies to this fragment. */
tern_status tern_tok_spm_encode(const tern_tokenizer *t, const char *text, size_t len, bool space_prefix,
                                tern_tok_scratch *sc, tern_tok_sink *sink, tern_error *err);
tern_status tern_tok_bpe_encode(const tern_tokenizer *t, const char *text, size_t len, tern_tok_scratch *sc,
                                tern_tok_sink *sink, tern_error *err);

/* Receives one word of a BPE pre-tokenizer split. */
typedef tern_status (*tern_tok_word_fn)(void *ctx, const char *word, size_t len, tern_error *err);
/* Splits a fragment into the words of t->pre (the only field it reads), in order; the words
 * cover the fragment. Uses sc->cps, cls and offs only (tokenizer_pretok.c). */
tern_status tern_tok_bpe_split(const tern_tokenizer *t, const char *text, size_t len, tern_tok_scratch *sc,
                               tern_tok_word_fn fn, void *ctx, tern_error *err);

/* BPE set-up at load: the pre-tokenizer from its name, the merges, the byte table and the
 * decoded pieces (the GPT-2 byte alphabet lives in tokenizer_bpe.c). */
tern_status tern_tok_bpe_pre_from_name(const char *name, size_t len, tern_tok_pre *pre, tern_error *err);
const char *tern_tok_bpe_pre_name(tern_tok_pre pre);
tern_status tern_tok_bpe_load_merges(tern_tokenizer *t, const tern_gguf *g, tern_error *err);
/* Writes the bytes token text decodes to into out (room for text_len bytes); returns the count. */
size_t tern_tok_bpe_decode_text(const char *text, size_t len, char *out);
/* Fills t->byte_token for BPE. */
void tern_tok_bpe_byte_tokens(tern_tokenizer *t);

#endif
