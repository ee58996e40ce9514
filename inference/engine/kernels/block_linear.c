/* Matmuls over quantized weight blocks, for a few rows of fp32 activations:
 * y = x W^T (+ b) (+ residual), and SwiGLU, with W held in the blocks of the GGUF file the
 * model ships as, never widened in memory:
 *   Q4_1: 32 weights as 4-bit q with a scale d and a minimum m, w = d q + m;
 *   Q8_0: 32 weights as 8-bit signed q with a scale d, w = d q.
 *
 * Why our own: the default model ships as a Q4_1 GGUF and runs in torch as the fp32 weights
 * dequantized from it. At a few rows (the decode step of a quiet site's one or two streams)
 * a matmul only streams its weights, and fp32 holds over four times the bytes of the
 * blocks (as held here, fp32 scales included).
 * Here each block is read as shipped and widened to fp32 in registers. d q is exact in
 * fp32, so the weights are the dequantized model's (to the rounding of its one add); the
 * sums run in another order than F.linear's, and the minimum enters once per block through
 * the block's sum of x: sum_i (d q_i + m) x_i = d sum_i q_i x_i + m sum_i x_i.
 *
 * Layouts (kernels/block_linear.py repacks the file's blocks into them, once, at load):
 *   qs [N, K/32, 16] bytes for Q4_1: byte j of each 8-byte half h holds weight 16h + j in
 *     its low nibble and 16h + 8 + j in its high nibble, so one zero-extending load and a
 *     mask or a shift give eight consecutive weights;
 *   qs [N, K/32, 32] int8 for Q8_0;
 *   d, m [N, K/32] fp32 (m only for Q4_1): the file's fp16 scales widened once at load;
 *     widening them a row at a time in the AVX2 loop cost more than the bytes it saved.
 *     The bf16 loop below takes them as the file's fp16: it widens 16 at a time.
 * Needs AVX2 and FMA; block_linear_supported() says whether this build has them.
 *
 * The same blocks serve a bf16 model's few rows (block_linear_bf16, block_swiglu_bf16;
 * AVX-512 with BF16 and VNNI, block_linear_bf16_supported()). Widening each weight to bf16
 * for vdpbf16ps cost more than streaming the bf16 weights; instead each row of x (times the
 * RMSNorm scale, where linear.py folds one into the packed weights) is quantized per block
 * of 32 to int16, and one vpdpwssd a block and row multiplies it by the block's q widened
 * to int16. That moves each value by at most 2^-16 of its block's largest, less than bf16's
 * own rounding of any value within 2^-7 of it, and the weights are the fp32 ones the file
 * dequantizes to, so the sums come out closer to fp32 than the packed bf16 weights give
 * them; rounded once to bf16.
 */
#include <stdint.h>
#include <math.h>
#include "bf16.h"
#include "parallel.h"
#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define HAVE_AVX2 1
#endif
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512VNNI__) && defined(__AVX512BF16__)
#define HAVE_AVX512_BF16 1
#endif

/* Rows a call takes: each row costs its own FMAs per block, and a little past this many
 * rows F.linear on the fp32 weights is the faster (docs/benchmarks-engine.md). */
#define MAX_ROWS 16
#define PREFETCH_BYTES 512
#define PF_I16 2048  /* bytes ahead in dot_row_i16, which streams faster than dot_row */
#define Q4_1 0
#define Q8_0 1

int block_linear_supported(void) {
#ifdef HAVE_AVX2
    return 1;
#else
    return 0;
#endif
}

int block_linear_bf16_supported(void) {
#ifdef HAVE_AVX512_BF16
    return 1;
#else
    return 0;
#endif
}

int block_linear_max_rows(void) { return MAX_ROWS; }

/* Whether a call splits its columns across `threads` itself (parallel.h), or takes the
 * columns [n0, n1) it is given on the calling thread only (block_linear.py then splits
 * only a matrix wide enough to repay a Python pool). */
int block_linear_parallel(void) { return built_parallel(); }

/* Columns a thread takes at least: fewer are streamed in about the time waking it costs. */
#define MIN_COLUMNS 128

#ifdef HAVE_AVX2
static inline float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* The 32 weights' q of one block, as fp32 in four registers of eight. */
static inline __attribute__((always_inline)) void widen(int kind, const uint8_t *q, __m256 w[4]) {
    if (kind == Q4_1) {
        const __m256i low = _mm256_set1_epi32(15);
        __m256i a = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)q));
        __m256i b = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(q + 8)));
        w[0] = _mm256_cvtepi32_ps(_mm256_and_si256(a, low));
        w[1] = _mm256_cvtepi32_ps(_mm256_srli_epi32(a, 4));
        w[2] = _mm256_cvtepi32_ps(_mm256_and_si256(b, low));
        w[3] = _mm256_cvtepi32_ps(_mm256_srli_epi32(b, 4));
    } else {
        const int8_t *s = (const int8_t *)q;
        for (int i = 0; i < 4; i++)
            w[i] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(s + 8 * i))));
    }
}

/* out[r] = x[r] . W[n] for the M rows of x (M a constant where this is inlined). */
static inline __attribute__((always_inline)) void dot_row(
        int kind, const uint8_t *qs, const float *d, const float *m, const float *x, const float *xsum,
        long n, long K, long M, float *out) {
    const long nb = K / 32, qb = kind == Q4_1 ? 16 : 32;
    const uint8_t *q = qs + n * nb * qb;
    const float *dn = d + n * nb;
    /* two blocks a pass, each into a sum of its own: the one FMA a block adds to its row's
     * sum would otherwise chain every block behind the previous one's latency */
    __m256 acc[MAX_ROWS], acc2[MAX_ROWS];
    for (long r = 0; r < M; r++) acc[r] = acc2[r] = _mm256_setzero_ps();
    long b = 0;
    for (; b + 2 <= nb; b += 2) {
        __m256 w[4], v[4];
        /* a few rows ahead (past the end of W only prefetched, which cannot fault): the
         * hardware prefetcher alone left the blocks' reads below the read bandwidth */
        _mm_prefetch((const char *)(q + b * qb + PREFETCH_BYTES), _MM_HINT_T0);
        _mm_prefetch((const char *)(dn + b + PREFETCH_BYTES / 8), _MM_HINT_T0);
        widen(kind, q + b * qb, w);
        widen(kind, q + (b + 1) * qb, v);
        __m256 scale = _mm256_broadcast_ss(dn + b), scale2 = _mm256_broadcast_ss(dn + b + 1);
        for (long r = 0; r < M; r++) {
            const float *xb = x + r * K + 32 * b;
            __m256 s = _mm256_mul_ps(w[0], _mm256_loadu_ps(xb));
            __m256 t = _mm256_mul_ps(v[0], _mm256_loadu_ps(xb + 32));
            s = _mm256_fmadd_ps(w[1], _mm256_loadu_ps(xb + 8), s);
            t = _mm256_fmadd_ps(v[1], _mm256_loadu_ps(xb + 40), t);
            s = _mm256_fmadd_ps(w[2], _mm256_loadu_ps(xb + 16), s);
            t = _mm256_fmadd_ps(v[2], _mm256_loadu_ps(xb + 48), t);
            s = _mm256_fmadd_ps(w[3], _mm256_loadu_ps(xb + 24), s);
            t = _mm256_fmadd_ps(v[3], _mm256_loadu_ps(xb + 56), t);
            acc[r] = _mm256_fmadd_ps(s, scale, acc[r]);
            acc2[r] = _mm256_fmadd_ps(t, scale2, acc2[r]);
        }
    }
    for (; b < nb; b++) {
        __m256 w[4];
        widen(kind, q + b * qb, w);
        __m256 scale = _mm256_broadcast_ss(dn + b);
        for (long r = 0; r < M; r++) {
            const float *xb = x + r * K + 32 * b;
            __m256 s = _mm256_mul_ps(w[0], _mm256_loadu_ps(xb));
            s = _mm256_fmadd_ps(w[1], _mm256_loadu_ps(xb + 8), s);
            s = _mm256_fmadd_ps(w[2], _mm256_loadu_ps(xb + 16), s);
            s = _mm256_fmadd_ps(w[3], _mm256_loadu_ps(xb + 24), s);
            acc[r] = _mm256_fmadd_ps(s, scale, acc[r]);
        }
    }
    for (long r = 0; r < M; r++) {
        float v = hsum(_mm256_add_ps(acc[r], acc2[r]));
        if (kind == Q4_1) {
            const float *mn = m + n * nb, *xs = xsum + r * nb;
            for (long b = 0; b < nb; b++) v += mn[b] * xs[b];
        }
        out[r] = v;
    }
}

static void dots(int kind, const uint8_t *qs, const float *d, const float *m, const float *x,
                 const float *xsum, long n, long K, long M, float *out) {
    /* kind and M constant per case, so each case's loops unroll and its sums stay in registers */
#define ROWS(KIND) \
    switch (M) { \
    case 1: dot_row(KIND, qs, d, m, x, xsum, n, K, 1, out); break; \
    case 2: dot_row(KIND, qs, d, m, x, xsum, n, K, 2, out); break; \
    case 3: dot_row(KIND, qs, d, m, x, xsum, n, K, 3, out); break; \
    case 4: dot_row(KIND, qs, d, m, x, xsum, n, K, 4, out); break; \
    default: dot_row(KIND, qs, d, m, x, xsum, n, K, M, out); break; \
    }
    if (kind == Q4_1) ROWS(Q4_1) else ROWS(Q8_0)
#undef ROWS
}
#endif

/* xsum [M, K/32]: each row's sums of x over each block (what the Q4_1 minimum multiplies). */
static void block_sums(const float *x, long K, long M, float *xsum) {
    for (long r = 0; r < M; r++)
        for (long b = 0; b < K / 32; b++) {
            float s = 0.f;
            for (int i = 0; i < 32; i++) s += x[r * K + 32 * b + i];
            xsum[r * (K / 32) + b] = s;
        }
}

/* A call this build cannot take: `built` says whether its instructions were compiled in. */
static int refused_by(int built, int kind, long K, long M) {
    return !built || (kind != Q4_1 && kind != Q8_0) || K % 32 || M < 1 || M > MAX_ROWS;
}

static int refused(int kind, long K, long M) {
    return refused_by(block_linear_supported(), kind, K, M);
}

/* y [M, N] = x [M, K] W^T + bias + residual, for output columns [n0, n1), split across
 * `threads` where block_linear_parallel(); bias [N], residual [M, N] may be NULL. Returns 0,
 * or -1 where refused (no AVX2/FMA in this build, an unknown kind, K not a multiple of 32,
 * M outside 1..MAX_ROWS). */
int block_linear_f32(int kind, const uint8_t *qs, const float *d, const float *m, const float *x,
                     const float *bias, const float *residual, float *y,
                     long n0, long n1, long K, long M, long N, int threads) {
    if (refused(kind, K, M)) return -1;
#ifdef HAVE_AVX2
    float xsum[M * (K / 32)];
    if (kind == Q4_1) block_sums(x, K, M, xsum);
    int nt = threads_for(threads, n1 - n0, MIN_COLUMNS);
    #pragma omp parallel num_threads(nt) if (nt > 1)
    {
        long a, b;
        float out[MAX_ROWS];
        piece(n0, n1, &a, &b);
        for (long n = a; n < b; n++) {
            dots(kind, qs, d, m, x, xsum, n, K, M, out);
            for (long r = 0; r < M; r++) {
                float v = out[r];
                if (bias) v += bias[n];
                if (residual) v += residual[r * N + n];
                y[r * N + n] = v;
            }
        }
    }
#else
    (void)threads;
#endif
    return 0;
}

/* y [M, F] = silu(x Wg^T) * (x Wu^T), W = [Wg; Wu] of 2F rows, for columns [n0, n1) of F. */
int block_swiglu_f32(int kind, const uint8_t *qs, const float *d, const float *m, const float *x,
                     float *y, long n0, long n1, long K, long M, long F, int threads) {
    if (refused(kind, K, M)) return -1;
#ifdef HAVE_AVX2
    float xsum[M * (K / 32)];
    if (kind == Q4_1) block_sums(x, K, M, xsum);
    int nt = threads_for(threads, n1 - n0, MIN_COLUMNS);
    #pragma omp parallel num_threads(nt) if (nt > 1)
    {
        long a, b;
        float g[MAX_ROWS], u[MAX_ROWS];
        piece(n0, n1, &a, &b);
        for (long n = a; n < b; n++) {
            dots(kind, qs, d, m, x, xsum, n, K, M, g);
            dots(kind, qs, d, m, x, xsum, n + F, K, M, u);
            for (long r = 0; r < M; r++)  /* clamped: expf past ~88 is inf, which fast-math does not promise */
                y[r * F + n] = g[r] / (1.f + expf(fminf(-g[r], 80.f))) * u[r];
        }
    }
#else
    (void)threads;
#endif
    return 0;
}

#ifdef HAVE_AVX512_BF16
/* 16 bf16 as fp32. */
static inline __m512 widen_bf16(const uint16_t *p) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)p)), 16));
}

/* Rows of x as int16 per block of 32: xq = round(x ln / sx) with sx = max |x ln| / 32767 over
 * the block, and xsum the block's sum of x ln (what a Q4_1 minimum multiplies), from the
 * unrounded values. The words go in the order the kind's weights widen to (widen16):
 * Q4_1 [0-7, 16-23, 8-15, 24-31], Q8_0 as they come. eps >= 0: each row RMS-normalized
 * first, x / sqrt(mean(x^2) + eps), in fp32 (the norm the model would otherwise run as torch
 * ops before this matmul). */
static void quantize_rows(int kind, const uint16_t *x, const float *ln, float eps, long K, long M,
                          int16_t *xq, float *sx, float *xsum) {
    const long nb = K / 32;
    const __m512 sign = _mm512_set1_ps(-0.f);
    for (long r = 0; r < M; r++) {
        __m512 rs = _mm512_set1_ps(1.f);
        if (eps >= 0.f) {
            __m512 ss = _mm512_setzero_ps();
            for (long i = 0; i < K; i += 16) {
                __m512 v = widen_bf16(x + r * K + i);
                ss = _mm512_fmadd_ps(v, v, ss);
            }
            rs = _mm512_set1_ps(1.f / sqrtf(_mm512_reduce_add_ps(ss) / (float)K + eps));
        }
        for (long b = 0; b < nb; b++) {
            const uint16_t *xb = x + r * K + 32 * b;
            __m512 v[2];
            for (int h = 0; h < 2; h++) {
                v[h] = _mm512_mul_ps(widen_bf16(xb + 16 * h), rs);
                if (ln) v[h] = _mm512_mul_ps(v[h], _mm512_loadu_ps(ln + 32 * b + 16 * h));
            }
            float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_andnot_ps(sign, v[0]), _mm512_andnot_ps(sign, v[1])));
            float inv = amax > 0.f ? 32767.f / amax : 0.f;
            sx[r * nb + b] = amax / 32767.f;
            xsum[r * nb + b] = _mm512_reduce_add_ps(_mm512_add_ps(v[0], v[1]));
            __m256i q0 = _mm512_cvtsepi32_epi16(_mm512_cvt_roundps_epi32(_mm512_mul_ps(v[0], _mm512_set1_ps(inv)),
                                                  _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
            __m256i q1 = _mm512_cvtsepi32_epi16(_mm512_cvt_roundps_epi32(_mm512_mul_ps(v[1], _mm512_set1_ps(inv)),
                                                  _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
            int16_t *out = xq + r * K + 32 * b;
            if (kind == Q4_1) {  /* weights 0-15 in q0, 16-31 in q1: interleave their halves of 8 */
                __m128i a0 = _mm256_castsi256_si128(q0), a1 = _mm256_extracti128_si256(q0, 1);
                __m128i b0 = _mm256_castsi256_si128(q1), b1 = _mm256_extracti128_si256(q1, 1);
                _mm_storeu_si128((__m128i *)out, a0);
                _mm_storeu_si128((__m128i *)(out + 8), b0);
                _mm_storeu_si128((__m128i *)(out + 16), a1);
                _mm_storeu_si128((__m128i *)(out + 24), b1);
            } else {
                _mm256_storeu_si256((__m256i *)out, q0);
                _mm256_storeu_si256((__m256i *)(out + 16), q1);
            }
        }
    }
}

/* The 32 q of one block as int16 words (Q4_1: low nibbles of the 16 bytes, then high). */
static inline __attribute__((always_inline)) __m512i widen16(int kind, const uint8_t *q) {
    if (kind == Q4_1) {
        __m256i v = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)q));
        v = _mm256_and_si256(_mm256_srlv_epi16(v, _mm256_set_epi16(4, 4, 4, 4, 4, 4, 4, 4, 0, 0, 0, 0, 0, 0, 0, 0)),
                             _mm256_set1_epi8(15));
        return _mm512_cvtepu8_epi16(v);
    }
    return _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)q));
}

/* Lanes b.. of p[0, n): all 16, or those before n. */
static inline __mmask16 mask16(long b, long n) {
    return n - b >= 16 ? 0xFFFF : (__mmask16)((1u << (n - b)) - 1);
}

/* p[b, b + 16) as fp32, of p[0, n) (zeros past n): fp16 p, fp32 p. */
static inline __m512 halves(const uint16_t *p, long b, long n) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(mask16(b, n), p + b));
}

static inline __m512 floats(const float *p, long b, long n) {
    return _mm512_maskz_loadu_ps(mask16(b, n), p + b);
}

/* out[r] = sum_b d_b sx_rb (q_b . xq_rb) + m_b xsum_rb for the M quantized rows; d, m the
 * file's fp16 scales (what the fp32 loop above widened once at load costs bytes here). */
static inline __attribute__((always_inline)) void dot_row_i16(
        int kind, const uint8_t *qs, const uint16_t *d, const uint16_t *m, const int16_t *xq, const float *sx,
        const float *xsum, long n, long K, long M, float *out) {
    const long nb = K / 32, qb = kind == Q4_1 ? 16 : 32;
    const uint8_t *q = qs + n * nb * qb;
    const uint16_t *dn = d + n * nb, *mn = kind == Q4_1 ? m + n * nb : dn;
    float scale[M * nb];  /* d_b sx_rb: each block's scale for each row */
    for (long r = 0; r < M; r++)
        for (long b = 0; b < nb; b += 16)
            _mm512_mask_storeu_ps(scale + r * nb + b, mask16(b, nb), _mm512_mul_ps(halves(dn, b, nb), floats(sx + r * nb, b, nb)));
    __m512 acc[MAX_ROWS], acc2[MAX_ROWS];
    for (long r = 0; r < M; r++) acc[r] = acc2[r] = _mm512_setzero_ps();
    long b = 0;
    for (; b + 2 <= nb; b += 2) {
        /* as in dot_row; the scales too */
        _mm_prefetch((const char *)(q + b * qb + PF_I16), _MM_HINT_T0);
        _mm_prefetch((const char *)(dn + b + PF_I16 / qb), _MM_HINT_T0);
        if (kind == Q4_1) _mm_prefetch((const char *)(mn + b + PF_I16 / qb), _MM_HINT_T0);
        __m512i w = widen16(kind, q + b * qb), v = widen16(kind, q + (b + 1) * qb);
        for (long r = 0; r < M; r++) {
            const int16_t *xb = xq + r * K + 32 * b;
            __m512i s = _mm512_dpwssd_epi32(_mm512_setzero_si512(), w, _mm512_loadu_si512(xb));
            __m512i t = _mm512_dpwssd_epi32(_mm512_setzero_si512(), v, _mm512_loadu_si512(xb + 32));
            acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_set1_ps(scale[r * nb + b]), acc[r]);
            acc2[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(t), _mm512_set1_ps(scale[r * nb + b + 1]), acc2[r]);
        }
    }
    for (; b < nb; b++) {
        __m512i w = widen16(kind, q + b * qb);
        for (long r = 0; r < M; r++) {
            __m512i s = _mm512_dpwssd_epi32(_mm512_setzero_si512(), w, _mm512_loadu_si512(xq + r * K + 32 * b));
            acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_set1_ps(scale[r * nb + b]), acc[r]);
        }
    }
    for (long r = 0; r < M; r++) {
        __m512 v = _mm512_add_ps(acc[r], acc2[r]);
        if (kind == Q4_1)
            for (long b = 0; b < nb; b += 16)
                v = _mm512_fmadd_ps(halves(mn, b, nb), floats(xsum + r * nb, b, nb), v);
        out[r] = _mm512_reduce_add_ps(v);
    }
}

/* The first PF_I16 bytes of rows [n0, ...) (and their scales), the prefetch the loop gives
 * every later block, asked for before the rows are quantized. */
static void prefetch_start(int kind, const uint8_t *qs, const uint16_t *d, const uint16_t *m, long n0, long K) {
    const long nb = K / 32, qb = kind == Q4_1 ? 16 : 32;
    for (long i = 0; i < PF_I16; i += 64) _mm_prefetch((const char *)(qs + n0 * nb * qb + i), _MM_HINT_T0);
    for (long i = 0; i < PF_I16 / qb * 2; i += 64) {
        _mm_prefetch((const char *)(d + n0 * nb) + i, _MM_HINT_T0);
        if (kind == Q4_1) _mm_prefetch((const char *)(m + n0 * nb) + i, _MM_HINT_T0);
    }
}

/* One row of x of 16 to 32 blocks (a 512- to 1024-wide matmul, most of a small model's): its
 * block scales and sums in registers for the whole call, so each output row's fixed work
 * (its scale table and the minimum's sum: masked loops in dot_row_i16, a large share of a
 * short row) is a few whole-register ops. */
typedef struct {
    __m512 sx[2], xsum[2];
    __mmask16 tail;  /* blocks 16.. of a row */
} OneRow;

static inline OneRow one_row(const float *sx, const float *xsum, long nb) {
    OneRow o;
    o.tail = mask16(16, nb);
    o.sx[0] = _mm512_loadu_ps(sx), o.sx[1] = _mm512_maskz_loadu_ps(o.tail, sx + 16);
    o.xsum[0] = _mm512_loadu_ps(xsum), o.xsum[1] = _mm512_maskz_loadu_ps(o.tail, xsum + 16);
    return o;
}

static inline __attribute__((always_inline)) float dot_one_i16(
        int kind, const uint8_t *qs, const uint16_t *d, const uint16_t *m, const int16_t *xq, const OneRow *o,
        long n, long nb) {
    const long qb = kind == Q4_1 ? 16 : 32;
    const uint8_t *q = qs + n * nb * qb;
    const uint16_t *dn = d + n * nb, *mn = kind == Q4_1 ? m + n * nb : dn;
    float scale[32];
    _mm512_storeu_ps(scale, _mm512_mul_ps(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)dn)), o->sx[0]));
    _mm512_storeu_ps(scale + 16, _mm512_mul_ps(_mm512_cvtph_ps(_mm256_maskz_loadu_epi16(o->tail, dn + 16)), o->sx[1]));
    __m512 acc = _mm512_setzero_ps(), acc2 = acc;
    long b = 0;
    for (; b + 2 <= nb; b += 2) {
        _mm_prefetch((const char *)(q + b * qb + PF_I16), _MM_HINT_T0);
        _mm_prefetch((const char *)(dn + b + PF_I16 / qb), _MM_HINT_T0);
        if (kind == Q4_1) _mm_prefetch((const char *)(mn + b + PF_I16 / qb), _MM_HINT_T0);
        __m512i s = _mm512_dpwssd_epi32(_mm512_setzero_si512(), widen16(kind, q + b * qb), _mm512_loadu_si512(xq + 32 * b));
        __m512i t = _mm512_dpwssd_epi32(_mm512_setzero_si512(), widen16(kind, q + (b + 1) * qb),
                                        _mm512_loadu_si512(xq + 32 * b + 32));
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_set1_ps(scale[b]), acc);
        acc2 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(t), _mm512_set1_ps(scale[b + 1]), acc2);
    }
    if (b < nb) {
        __m512i s = _mm512_dpwssd_epi32(_mm512_setzero_si512(), widen16(kind, q + b * qb), _mm512_loadu_si512(xq + 32 * b));
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_set1_ps(scale[b]), acc);
    }
    __m512 v = _mm512_add_ps(acc, acc2);
    if (kind == Q4_1) {
        v = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)mn)), o->xsum[0], v);
        v = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm256_maskz_loadu_epi16(o->tail, mn + 16)), o->xsum[1], v);
    }
    return _mm512_reduce_add_ps(v);
}

/* Whether the M rows of x take dot_one_i16 (set up in *o) or dot_row_i16. */
static inline int takes_one_row(long M, long nb, const float *sx, const float *xsum, OneRow *o) {
    if (M != 1 || nb < 16 || nb > 32) return 0;
    *o = one_row(sx, xsum, nb);
    return 1;
}

/* out[r] = x[r] . W[n] for the M quantized rows: through dot_one_i16 where `one` is given. */
static inline __attribute__((always_inline)) void dots_i16(
        int kind, const uint8_t *qs, const uint16_t *d, const uint16_t *m, const int16_t *xq, const float *sx,
        const float *xsum, const OneRow *one, long n, long K, long M, float *out) {
    if (one) {
        out[0] = kind == Q4_1 ? dot_one_i16(Q4_1, qs, d, m, xq, one, n, K / 32)
                              : dot_one_i16(Q8_0, qs, d, m, xq, one, n, K / 32);
        return;
    }
#define ROWS(KIND) \
    switch (M) { \
    case 1: dot_row_i16(KIND, qs, d, m, xq, sx, xsum, n, K, 1, out); break; \
    case 2: dot_row_i16(KIND, qs, d, m, xq, sx, xsum, n, K, 2, out); break; \
    case 3: dot_row_i16(KIND, qs, d, m, xq, sx, xsum, n, K, 3, out); break; \
    case 4: dot_row_i16(KIND, qs, d, m, xq, sx, xsum, n, K, 4, out); break; \
    default: dot_row_i16(KIND, qs, d, m, xq, sx, xsum, n, K, M, out); break; \
    }
    if (kind == Q4_1) ROWS(Q4_1) else ROWS(Q8_0)
#undef ROWS
}
#endif

static int refused_bf16(int kind, long K, long M) {
    return refused_by(block_linear_bf16_supported(), kind, K, M);
}

/* y [M, N] = round(x diag(ln) W^T + bias + residual) for bf16 x, bias [N], residual [M, N]
 * (either may be NULL), ln [K] fp32 an RMSNorm scale (or NULL), eps >= 0: x RMS-normalized
 * first (quantize_rows); output columns [n0, n1).
 * Returns 0, or -1 where refused (no AVX512-BF16/VNNI in this build, an unknown kind, K not
 * a multiple of 32, M outside 1..MAX_ROWS). */
int block_linear_bf16(int kind, const uint8_t *qs, const uint16_t *d, const uint16_t *m, const float *ln,
                      float eps, const uint16_t *x, const uint16_t *bias, const uint16_t *residual, uint16_t *y,
                      long n0, long n1, long K, long M, long N, int threads) {
    if (refused_bf16(kind, K, M)) return -1;
#ifdef HAVE_AVX512_BF16
    const long nb = K / 32;
    int16_t xq[M * K];
    float sx[M * nb], xsum[M * nb];
    prefetch_start(kind, qs, d, m, n0, K);
    quantize_rows(kind, x, ln, eps, K, M, xq, sx, xsum);
    OneRow o;
    const OneRow *one = takes_one_row(M, nb, sx, xsum, &o) ? &o : NULL;
    int nt = threads_for(threads, n1 - n0, MIN_COLUMNS);
    #pragma omp parallel num_threads(nt) if (nt > 1)
    {
        long a, b;
        float out[MAX_ROWS];
        piece(n0, n1, &a, &b);
        for (long n = a; n < b; n++) {
            dots_i16(kind, qs, d, m, xq, sx, xsum, one, n, K, M, out);
            for (long r = 0; r < M; r++) {
                float v = out[r];
                if (bias) v += bf16_to_f32(bias[n]);
                if (residual) v += bf16_to_f32(residual[r * N + n]);
                y[r * N + n] = f32_to_bf16(v);
            }
        }
    }
#else
    (void)qs; (void)d; (void)m; (void)ln; (void)eps; (void)x; (void)bias; (void)residual; (void)y; (void)n0; (void)n1; (void)N;
    (void)threads;
#endif
    return 0;
}

/* y [M, F] = silu(x' Wg^T) * (x' Wu^T), x' = x diag(ln) (normalized first where eps >= 0),
 * for bf16 x, rounded as row_swiglu_bf16 does, W = [Wg; Wu] of 2F rows; columns [n0, n1) of F. */
int block_swiglu_bf16(int kind, const uint8_t *qs, const uint16_t *d, const uint16_t *m, const float *ln,
                      float eps, const uint16_t *x, uint16_t *y, long n0, long n1, long K, long M, long F,
                      int threads) {
    if (refused_bf16(kind, K, M)) return -1;
#ifdef HAVE_AVX512_BF16
    const long nb = K / 32;
    int16_t xq[M * K];
    float sx[M * nb], xsum[M * nb];
    prefetch_start(kind, qs, d, m, n0, K);
    quantize_rows(kind, x, ln, eps, K, M, xq, sx, xsum);
    OneRow o;
    const OneRow *one = takes_one_row(M, nb, sx, xsum, &o) ? &o : NULL;
    int nt = threads_for(threads, n1 - n0, MIN_COLUMNS);
    #pragma omp parallel num_threads(nt) if (nt > 1)
    {
        long a, b;
        float g[MAX_ROWS], u[MAX_ROWS];
        piece(n0, n1, &a, &b);
        for (long n = a; n < b; n++) {
            dots_i16(kind, qs, d, m, xq, sx, xsum, one, n, K, M, g);
            dots_i16(kind, qs, d, m, xq, sx, xsum, one, n + F, K, M, u);
            for (long r = 0; r < M; r++) {
                float gate = bf16_to_f32(f32_to_bf16(g[r] / (1.f + expf(fminf(-g[r], 80.f)))));
                y[r * F + n] = f32_to_bf16(gate * u[r]);
            }
        }
    }
#else
    (void)qs; (void)d; (void)m; (void)ln; (void)eps; (void)x; (void)y; (void)n0; (void)n1; (void)F; (void)threads;
#endif
    return 0;
}

/* y [M, K] = x + down(silu(x' Wg^T) * (x' Wu^T)), x' = x diag(ln) (normalized first where
 * eps >= 0): a layer's MLP in one call, its [M, F] middle rounded to bf16 as
 * block_swiglu_bf16 gives it and never leaving this function. gate_up: [Wg; Wu] of 2F rows
 * of width K; down: K rows of width F. */
int block_mlp_bf16(int kind, const uint8_t *qs, const uint16_t *d, const uint16_t *m, const float *ln, float eps,
                   int down_kind, const uint8_t *down_qs, const uint16_t *down_d, const uint16_t *down_m,
                   const uint16_t *x, uint16_t *y, long K, long F, long M, int threads) {
    if (refused_bf16(kind, K, M) || refused_bf16(down_kind, F, M)) return -1;
#ifdef HAVE_AVX512_BF16
    uint16_t mid[M * F];
    block_swiglu_bf16(kind, qs, d, m, ln, eps, x, mid, 0, F, K, M, F, threads);
    return block_linear_bf16(down_kind, down_qs, down_d, down_m, NULL, -1.f, mid, NULL, x, y, 0, K, F, M, K, threads);
#else
    (void)qs; (void)d; (void)m; (void)ln; (void)eps; (void)down_qs; (void)down_d; (void)down_m; (void)x; (void)y;
    (void)threads;
    return 0;
#endif
}

