/* Decode attention: one new token per row, grouped-query heads, over a KV cache whose
 * visible positions are a prefix [0, position] of each row; with the RoPE of that token's
 * q and k and the write of its k and v into the cache, which the same call does.
 *
 * Why our own: torch's CPU attention (SDPA's flash kernel, or bmm + softmax) solves each
 * (row, KV head) pair as a separate small GEMM, and at decode shapes (3 queries x ~100
 * keys x 64 dims) the per-call set-up costs several times the work, so the cache is read
 * at a small fraction of the memory bandwidth. Here each pair is two passes over its keys
 * and values, read once for all G query heads, in fp32 registers. RoPE and the cache
 * write come along because, as separate torch ops, they were a few more dispatches per
 * layer, a visible share of a one-row step.
 *
 * Positions past a row's own are never read, so a cache position that was never written
 * (or holds another row's stale data) cannot reach the result.
 *
 * Built at run time for this CPU (-O3 -march=native -ffast-math) by kernels/build.py:
 * fast-math lets the loops over D vectorise as reductions and expf use glibc's vector
 * math; no input here is infinite or NaN (scores are finite, exponents are <= 0 after the
 * max is subtracted).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include "bf16.h"
#include "parallel.h"
#if defined(__AVX512F__) && defined(__AVX512BF16__)
#include <immintrin.h>
#define HAVE_AVX512_BF16 1
#endif


#define MAX_G 16
#define MAX_D 256

/* Each (row, KV head) reads two short runs (~100 rows of keys, then as many of values)
 * and jumps elsewhere, too short for the hardware prefetcher to ramp up on: the keys are
 * prefetched this many rows ahead, the values during the pass over the keys (so the
 * second pass finds them in cache), and the next head's first keys during the second
 * pass. Without them the kernel spent most of its time waiting on memory (see
 * docs/benchmarks-engine.md). A row past the end of the cache is never read, only
 * prefetched, which cannot fault. */
#ifndef PREFETCH_ROWS
#define PREFETCH_ROWS 16
#endif

static inline void prefetch_row(const void *p, long bytes) {
    for (long off = 0; off < bytes; off += 64) __builtin_prefetch((const char *)p + off, 0, 3);
}

/* One (row, KV head): G queries q (fp32, [G][D]) against n keys/values; out fp32 [G][D].
 * `scores` has room for G * n floats. ELEM is the cache's element type. */
#define DEFINE_HEAD(NAME, ELEM, LOAD)                                                       \
static inline __attribute__((always_inline)) void NAME(const float *restrict q, const ELEM *restrict k, const ELEM *restrict v,  \
                 long n, long t_stride, int G, int D, float scale, float *restrict scores,  \
                 float *restrict out, const ELEM *next_k) {                                 \
    float row[MAX_D];                                                                       \
    for (long t = 0; t < n; t++) {                                                          \
        const ELEM *kt = k + t * t_stride;                                                  \
        prefetch_row(kt + PREFETCH_ROWS * t_stride, D * sizeof(ELEM));                      \
        prefetch_row(v + t * t_stride, D * sizeof(ELEM));                                   \
        for (int d = 0; d < D; d++) row[d] = LOAD(kt[d]);                                   \
        for (int g = 0; g < G; g++) {                                                       \
            const float *qg = q + g * D;                                                    \
            float acc = 0.f;                                                                \
            for (int d = 0; d < D; d++) acc += qg[d] * row[d];                              \
            scores[g * n + t] = acc * scale;                                                \
        }                                                                                   \
    }                                                                                       \
    for (int g = 0; g < G; g++) {                                                           \
        float *s = scores + g * n;                                                          \
        float m = s[0];                                                                     \
        for (long t = 1; t < n; t++) m = s[t] > m ? s[t] : m;                               \
        float sum = 0.f;                                                                    \
        for (long t = 0; t < n; t++) { s[t] = expf(s[t] - m); sum += s[t]; }                \
        float inv = 1.f / sum;                                                              \
        for (long t = 0; t < n; t++) s[t] *= inv;                                           \
        memset(out + g * D, 0, sizeof(float) * D);                                          \
    }                                                                                       \
    for (long t = 0; t < n; t++) {                                                          \
        const ELEM *vt = v + t * t_stride;                                                  \
        if (t < PREFETCH_ROWS) prefetch_row(next_k + t * t_stride, D * sizeof(ELEM));       \
        for (int d = 0; d < D; d++) row[d] = LOAD(vt[d]);                                   \
        for (int g = 0; g < G; g++) {                                                       \
            float p = scores[g * n + t];                                                    \
            float *og = out + g * D;                                                        \
            for (int d = 0; d < D; d++) og[d] += p * row[d];                                \
        }                                                                                   \
    }                                                                                       \
}

#define LOAD_BF16(x) bf16_to_f32(x)
#define LOAD_F32(x) (x)
DEFINE_HEAD(head_bf16, uint16_t, LOAD_BF16)
DEFINE_HEAD(head_f32, float, LOAD_F32)


#ifdef HAVE_AVX512_BF16
/* The bf16 cache on a CPU with AVX512-BF16, D = 64: a key's 64 products with a query
 * are two vdpbf16ps (bf16 pairs summed into fp32); a value row is widened to fp32 once
 * and added into the G outputs. qb: the G queries in bf16 (as stored), [G][64]. */
static void head_bf16_avx512(const uint16_t *restrict qb, const uint16_t *restrict k,
                             const uint16_t *restrict v, long n, long t_stride, int G,
                             float scale, float *restrict scores, float *restrict out,
                             const uint16_t *next_k) {
    __m512bh ql[MAX_G], qh[MAX_G];
    for (int g = 0; g < G; g++) {
        ql[g] = (__m512bh)_mm512_loadu_si512(qb + g * 64);
        qh[g] = (__m512bh)_mm512_loadu_si512(qb + g * 64 + 32);
    }
    for (long t = 0; t < n; t++) {
        const uint16_t *kt = k + t * t_stride;
        prefetch_row(kt + PREFETCH_ROWS * t_stride, 128);
        prefetch_row(v + t * t_stride, 128);
        __m512bh kl = (__m512bh)_mm512_loadu_si512(kt), kh = (__m512bh)_mm512_loadu_si512(kt + 32);
        for (int g = 0; g < G; g++) {
            __m512 acc = _mm512_dpbf16_ps(_mm512_setzero_ps(), ql[g], kl);
            acc = _mm512_dpbf16_ps(acc, qh[g], kh);
            scores[g * n + t] = _mm512_reduce_add_ps(acc) * scale;
        }
    }
    for (int g = 0; g < G; g++) {
        float *s = scores + g * n;
        float m = s[0];
        for (long t = 1; t < n; t++) m = s[t] > m ? s[t] : m;
        float sum = 0.f;
        for (long t = 0; t < n; t++) { s[t] = expf(s[t] - m); sum += s[t]; }
        float inv = 1.f / sum;
        for (long t = 0; t < n; t++) s[t] *= inv;
    }
    __m512 o[MAX_G][4];
    for (int g = 0; g < G; g++)
        for (int j = 0; j < 4; j++) o[g][j] = _mm512_setzero_ps();
    for (long t = 0; t < n; t++) {
        const uint16_t *vt = v + t * t_stride;
        if (t < PREFETCH_ROWS) prefetch_row(next_k + t * t_stride, 128);
        __m512 vr[4];
        for (int j = 0; j < 4; j++)
            vr[j] = _mm512_castsi512_ps(_mm512_slli_epi32(
                _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(vt + 16 * j))), 16));
        for (int g = 0; g < G; g++) {
            __m512 p = _mm512_set1_ps(scores[g * n + t]);
            for (int j = 0; j < 4; j++) o[g][j] = _mm512_fmadd_ps(p, vr[j], o[g][j]);
        }
    }
    for (int g = 0; g < G; g++)
        for (int j = 0; j < 4; j++) _mm512_storeu_ps(out + g * 64 + 16 * j, o[g][j]);
}
#endif

/* RoPE on one head in place: x cos + swap_halves(x) sin', with sin' the sine with its
 * first half negated (the model's tables). Rounded as torch rounds it in the model
 * dtype: the product x cos first, then the sum (ROUND is the identity for fp32). */
#define DEFINE_ROPE(NAME, ELEM, LOAD, ROUND)                                                \
static inline void NAME(ELEM *x, const ELEM *c, const ELEM *s, int D) {                    \
    int half = D / 2;                                                                       \
    for (int d = 0; d < half; d++) {                                                        \
        float a = LOAD(x[d]), b = LOAD(x[d + half]);                                        \
        float ta = ROUND(a * LOAD(c[d])), tb = ROUND(b * LOAD(c[d + half]));                \
        x[d] = ROUND_STORE(ta + b * LOAD(s[d]));                                            \
        x[d + half] = ROUND_STORE(tb + a * LOAD(s[d + half]));                              \
    }                                                                                       \
}

/* Rows a thread takes at least: a row's attention at a chat's length is a few
 * microseconds, about what waking a thread costs. */
#define MIN_ROWS 2

/* One layer's decode attention for rows [b0, b1) of a batch, one new token per row, split
 * across `threads` where decode_attention_parallel():
 * RoPE on the row's q and k heads (in place in qkv), its k and v written into the cache
 * at the row's position, then its queries attend to positions [0, position].
 *   qkv [B, H + 2 Hkv, D] contiguous (q heads, k heads, v heads, as the qkv matmul gives)
 *   cos, sin [P, D] the model's RoPE tables; pos [B] each row's position
 *   kv  [B, 2 Hkv, T, D] one layer's cache, element strides kv_sb, kv_sh, kv_st
 *   out [B, Hkv, G, D] contiguous
 * Returns 0; -1 when G or D exceed the kernel's buffers; -2 out of memory; -3 a position
 * outside the cache or the tables (nothing is written then). */
#define DEFINE_ENTRY(NAME, ELEM, HEAD, LOADQ, STOREO, ROPE, FAST, FASTHEAD)                 \
int NAME(ELEM *qkv, const ELEM *cos, const ELEM *sin, long P, const int64_t *pos,          \
         ELEM *kv, long kv_sb, long kv_sh, long kv_st, long T, ELEM *out, int b0, int b1,  \
         int H, int Hkv, int D, float scale, int threads) {                                 \
    int G = H / Hkv;                                                                        \
    if (G > MAX_G || D > MAX_D || G * Hkv != H || D % 2) return -1;                         \
    long longest = 1;                                                                       \
    for (int b = b0; b < b1; b++) {                                                         \
        if (pos[b] < 0 || pos[b] >= T || pos[b] >= P) return -3;                            \
        longest = pos[b] + 1 > longest ? pos[b] + 1 : longest;                              \
    }                                                                                       \
    long row = (long)(H + 2 * Hkv) * D;                                                     \
    int failed = 0, nt = threads_for(threads, b1 - b0, MIN_ROWS);                           \
    _Pragma("omp parallel num_threads(nt) if (nt > 1) reduction(|:failed)")                \
    {                                                                                       \
        long r0, r1;                                                                        \
        piece(b0, b1, &r0, &r1);                                                            \
        float *scratch = r1 > r0 ? malloc(sizeof(float) * G * longest) : NULL;             \
        if (r1 > r0 && !scratch) failed = 1;                                                \
        float qf[MAX_G * MAX_D], of[MAX_G * MAX_D];                                         \
        for (long b = r0; scratch && b < r1; b++) {                                         \
            long p = pos[b], n = p + 1;                                                     \
            ELEM *x = qkv + b * row;                                                        \
            const ELEM *c = cos + p * D, *s = sin + p * D;                                  \
            for (int h = 0; h < H + Hkv; h++) ROPE(x + (long)h * D, c, s, D);               \
            for (int h = 0; h < 2 * Hkv; h++)                                               \
                memcpy(kv + b * kv_sb + h * kv_sh + p * kv_st, x + (long)(H + h) * D,       \
                       sizeof(ELEM) * D);                                                   \
            for (int h = 0; h < Hkv; h++) {                                                 \
                const ELEM *qh = x + (long)h * G * D;                                       \
                if (!FAST(G, D))  /* the generic loops read the queries in fp32 */          \
                    for (int i = 0; i < G * D; i++) qf[i] = LOADQ(qh[i]);                   \
                const ELEM *kh = kv + b * kv_sb + h * kv_sh, *vh = kv + b * kv_sb + (Hkv + h) * kv_sh; \
                const ELEM *next = h + 1 < Hkv ? kh + kv_sh : kv + (b + 1) * kv_sb;         \
                if (FAST(G, D)) FASTHEAD(qh, kh, vh, n, kv_st, G, scale, scratch, of, next); \
                /* the common shape as constants, so the compiler unrolls the loops over D */ \
                else if (G == 3 && D == 64) HEAD(qf, kh, vh, n, kv_st, 3, 64, scale, scratch, of, next); \
                else HEAD(qf, kh, vh, n, kv_st, G, D, scale, scratch, of, next);            \
                ELEM *oh = out + ((long)b * Hkv + h) * G * D;                               \
                for (int i = 0; i < G * D; i++) oh[i] = STOREO(of[i]);                      \
            }                                                                               \
        }                                                                                   \
        free(scratch);                                                                      \
    }                                                                                       \
    return failed ? -2 : 0;                                                                 \
}

/* Whether a call splits its rows across `threads` itself (parallel.h), or takes the rows
 * [b0, b1) it is given on the calling thread only (decode_attention.py then splits them). */
int decode_attention_parallel(void) { return built_parallel(); }

#define STORE_BF16(x) f32_to_bf16(x)
#define STORE_F32(x) (x)
#define ROUND_BF16(x) bf16_to_f32(f32_to_bf16(x))
#define ROUND_F32(x) (x)
#define ROUND_STORE STORE_BF16
DEFINE_ROPE(rope_bf16, uint16_t, LOAD_BF16, ROUND_BF16)
#undef ROUND_STORE
#define ROUND_STORE STORE_F32
DEFINE_ROPE(rope_f32, float, LOAD_F32, ROUND_F32)
#undef ROUND_STORE
#define NEVER(G, D) 0
#define NO_FASTHEAD(...) (void)0
#ifdef HAVE_AVX512_BF16
#define FAST_BF16(G, D) ((D) == 64 && (G) <= MAX_G)
DEFINE_ENTRY(decode_layer_bf16, uint16_t, head_bf16, LOAD_BF16, STORE_BF16, rope_bf16, FAST_BF16, head_bf16_avx512)
#else
DEFINE_ENTRY(decode_layer_bf16, uint16_t, head_bf16, LOAD_BF16, STORE_BF16, rope_bf16, NEVER, NO_FASTHEAD)
#endif
DEFINE_ENTRY(decode_layer_f32, float, head_f32, LOAD_F32, STORE_F32, rope_f32, NEVER, NO_FASTHEAD)
