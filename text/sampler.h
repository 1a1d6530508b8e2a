/*
 * Token sampler: turns one row of logits into one token id.
 *
 * The filters run in llama.cpp's default order, so a given set of parameters behaves as it does
 * there: repetition penalty -> top-k -> top-p -> min-p -> temperature -> random draw. top-p and
 * min-p therefore look at the untempered distribution (temperature 1) and temperature only
 * reshapes what is left. temperature <= 0 means greedy (argmax after the penalty; ties go to the
 * lowest id).
 *
 * Each sampler owns its random state (xoshiro256** seeded from `seed`), so the same seed, logits
 * and accepted tokens give the same choices. All scratch memory is sized at create: sampling a
 * token allocates nothing.
 */
#ifndef TERN_TEXT_SAMPLER_H
#define TERN_TEXT_SAMPLER_H

#include "tern.h"

/* The public sampler API (tern_sampler_params, tern_sampler_create/sample/accept/reset/free)
 * is declared in tern.h. */

/* Checks at create: top_k >= 0, top_p and min_p in [0, 1], repeat_penalty > 0,
 * 0 <= repeat_last_n <= TERN_SAMPLER_MAX_LAST_N, all finite. tern_sampler_sample takes exactly
 * the n_vocab given at create, leaves *out_token untouched on error and does not record its
 * choice (call tern_sampler_accept). tern_sampler_reset forgets the history and restarts the
 * random sequence from the seed. */
#define TERN_SAMPLER_MAX_LAST_N (1 << 20)

#endif
