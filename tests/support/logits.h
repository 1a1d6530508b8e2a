/*
 * Small helpers over a logit vector for the golden tests (tests/test_golden.c,
 * tests/test_golden_arch.c).
 */
#ifndef TERN_TESTS_LOGITS_H
#define TERN_TESTS_LOGITS_H

#include <stdint.h>

/* Rank of token among n logits (0 = the highest; ties go to the lower id). */
int test_logit_rank(const float *logits, int64_t n, int32_t token);
/* The id of the highest logit (the lowest id among equal ones). */
int32_t test_logit_argmax(const float *logits, int64_t n);

#endif
