/*
 * Row converters of every type in the table, one pair per type (quant/ internal: other modules
 * reach them through tern_quant_type_get). n is the element count, a multiple of the type's
 * block size; a row of another length is a caller bug and stops at TERN_ASSERT.
 */
#ifndef TERN_QUANT_ROWS_H
#define TERN_QUANT_ROWS_H

#include <stdint.h>

void tern_dequantize_row_f32(const void *restrict src, float *restrict dst, int64_t n);
void tern_quantize_row_f32(const float *restrict src, void *restrict dst, int64_t n);
void tern_dequantize_row_f16(const void *restrict src, float *restrict dst, int64_t n);
void tern_quantize_row_f16(const float *restrict src, void *restrict dst, int64_t n);
void tern_dequantize_row_bf16(const void *restrict src, float *restrict dst, int64_t n);
void tern_quantize_row_bf16(const float *restrict src, void *restrict dst, int64_t n);
void tern_dequantize_row_q4_0(const void *restrict src, float *restrict dst, int64_t n);
void tern_quantize_row_q4_0(const float *restrict src, void *restrict dst, int64_t n);
void tern_dequantize_row_q4_1(const void *restrict src, float *restrict dst, int64_t n);
void tern_quantize_row_q4_1(const float *restrict src, void *restrict dst, int64_t n);
void tern_dequantize_row_q5_0(const void *restrict src, float *restrict dst, int64_t n);
void tern_quantize_row_q5_0(const float *restrict src, void *restrict dst, int64_t n);
void tern_dequantize_row_q5_1(const void *restrict src, float *restrict dst, int64_t n);
void tern_quantize_row_q5_1(const float *restrict src, void *restrict dst, int64_t n);
void tern_dequantize_row_q8_0(const void *restrict src, float *restrict dst, int64_t n);
void tern_quantize_row_q8_0(const float *restrict src, void *restrict dst, int64_t n);
void tern_dequantize_row_q2_k(const void *restrict src, float *restrict dst, int64_t n);
void tern_quantize_row_q2_k(const float *restrict src, void *restrict dst, int64_t n);
void tern_dequantize_row_q3_k(const void *restrict src, float *restrict dst, int64_t n);
void tern_quantize_row_q3_k(const float *restrict src, void *restrict dst, int64_t n);
void tern_dequantize_row_q4_k(const void *restrict src, float *restrict dst, int64_t n);
void tern_quantize_row_q4_k(const float *restrict src, void *restrict dst, int64_t n);
void tern_dequantize_row_q5_k(const void *restrict src, float *restrict dst, int64_t n);
void tern_quantize_row_q5_k(const float *restrict src, void *restrict dst, int64_t n);
void tern_dequantize_row_q6_k(const void *restrict src, float *restrict dst, int64_t n);
void tern_quantize_row_q6_k(const float *restrict src, void *restrict dst, int64_t n);
void tern_dequantize_row_q8_k(const void *restrict src, float *restrict dst, int64_t n);
void tern_quantize_row_q8_k(const float *restrict src, void *restrict dst, int64_t n);

#endif
