/* One-row bf16 matmuls: y = x W^T (+ b) for a single row x, the decode step of one stream.
 *
 * Why our own: at one row a matmul only streams its weights, and oneDNN's bf16 path
 * (packed weights, the engine's kernel for every other batch size) reads them below the
 * machine's read bandwidth, with a fixed cost per call on top; a decode step is ~150 such
 * calls. Here each call reads W [N, K] row-major once, four rows at a time, with two
 * vdpbf16ps per 64 weights and software prefetch a few rows ahead, accumulating in fp32
 * and rounding once, as oneDNN does. Needs AVX512-BF16; kernels/row_linear.py uses it only
 * where the library says so (row_linear_supported).
 *
 * Post-ops, as the engine's Linear offers them: a residual added before the rounding
 * (row_linear_bf16 with residual), and SwiGLU (silu(x Wg^T) * x Wu^T, row_swiglu_bf16).
 */
#include <stdint.h>
#include <string.h>
#include <math.h>
#include "bf16.h"
#include "parallel.h"
#if defined(__AVX512F__) && defined(__AVX512BF16__)
#include <immintrin.h>
#define HAVE_AVX512_BF16 1
#endif

#define PREFETCH_ROWS 8


int row_linear_supported(void) {
#ifdef HAVE_AVX512_BF16
    return 1;
#else
    return 0;
#endif
}

#ifdef HAVE_AVX512_BF16
/* acc[n] = x . W[n] for n in [0, N), fp32. K % 32 == 0. */
static void dots(const uint16_t *restrict W, const uint16_t *restrict x, float *restrict acc, long N, long K) {
    long nk = K / 32;
    long n = 0;
    for (; n + 4 <= N; n += 4) {
        const uint16_t *w0 = W + n * K, *w1 = w0 + K, *w2 = w1 + K, *w3 = w2 + K;
        __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        for (long j = 0; j < nk; j++) {
            /* rows n+PREFETCH_ROWS.. ahead; past the end of W they are only prefetched,
             * which cannot fault */
            _mm_prefetch((const char *)(w0 + PREFETCH_ROWS * K + 32 * j), _MM_HINT_T0);
            _mm_prefetch((const char *)(w1 + PREFETCH_ROWS * K + 32 * j), _MM_HINT_T0);
            _mm_prefetch((const char *)(w2 + PREFETCH_ROWS * K + 32 * j), _MM_HINT_T0);
            _mm_prefetch((const char *)(w3 + PREFETCH_ROWS * K + 32 * j), _MM_HINT_T0);
            __m512bh xv = (__m512bh)_mm512_loadu_si512(x + 32 * j);
            a0 = _mm512_dpbf16_ps(a0, (__m512bh)_mm512_loadu_si512(w0 + 32 * j), xv);
            a1 = _mm512_dpbf16_ps(a1, (__m512bh)_mm512_loadu_si512(w1 + 32 * j), xv);
            a2 = _mm512_dpbf16_ps(a2, (__m512bh)_mm512_loadu_si512(w2 + 32 * j), xv);
            a3 = _mm512_dpbf16_ps(a3, (__m512bh)_mm512_loadu_si512(w3 + 32 * j), xv);
        }
        acc[n] = _mm512_reduce_add_ps(a0);
        acc[n + 1] = _mm512_reduce_add_ps(a1);
        acc[n + 2] = _mm512_reduce_add_ps(a2);
        acc[n + 3] = _mm512_reduce_add_ps(a3);
    }
    for (; n < N; n++) {
        const uint16_t *w0 = W + n * K;
        __m512 a0 = _mm512_setzero_ps();
        for (long j = 0; j < nk; j++)
            a0 = _mm512_dpbf16_ps(a0, (__m512bh)_mm512_loadu_si512(w0 + 32 * j),
                                  (__m512bh)_mm512_loadu_si512(x + 32 * j));
        acc[n] = _mm512_reduce_add_ps(a0);
    }
}
#endif

/* Output rows a thread takes at least: fewer are streamed in about the time waking it costs. */
#define MIN_ROWS 128

/* Whether a call splits its output rows across `threads` itself (parallel.h), or takes the
 * rows [n0, n1) it is given on the calling thread only (row_linear.py then splits them). */
int row_linear_parallel(void) { return built_parallel(); }

/* y [N] = round(x W^T + bias + residual); bias, residual may be NULL. Rows [n0, n1) of
 * the output, split across `threads` where row_linear_parallel(). Returns 0, or -1 where
 * unsupported (no AVX512-BF16, K not a multiple of 32). */
int row_linear_bf16(const uint16_t *W, const uint16_t *bias, const uint16_t *x, const uint16_t *residual,
                    uint16_t *y, long n0, long n1, long K, int threads) {
#ifdef HAVE_AVX512_BF16
    if (K % 32) return -1;
    int nt = threads_for(threads, n1 - n0, MIN_ROWS);
    #pragma omp parallel num_threads(nt) if (nt > 1)
    {
        long a, b;
        float acc[256];
        piece(n0, n1, &a, &b);
        for (long n = a; n < b; n += 256) {
            long m = b - n < 256 ? b - n : 256;
            dots(W + n * K, x, acc, m, K);
            for (long i = 0; i < m; i++) {
                float v = acc[i];
                if (bias) v += bf16_to_f32(bias[n + i]);
                if (residual) v += bf16_to_f32(residual[n + i]);
                y[n + i] = f32_to_bf16(v);
            }
        }
    }
    return 0;
#else
    (void)W; (void)bias; (void)x; (void)residual; (void)y; (void)n0; (void)n1; (void)K; (void)threads;
    return -1;
#endif
}

/* y [F] = round(silu(round(x Wg^T)) ... ) as the packed path computes it: the gate
 * rounded to bf16 after its SiLU, then gate * (x Wu^T) rounded. Rows [n0, n1). */
int row_swiglu_bf16(const uint16_t *Wg, const uint16_t *Wu, const uint16_t *x, uint16_t *y,
                    long n0, long n1, long K, int threads) {
#ifdef HAVE_AVX512_BF16
    if (K % 32) return -1;
    int nt = threads_for(threads, n1 - n0, MIN_ROWS);
    #pragma omp parallel num_threads(nt) if (nt > 1)
    {
        long a, b;
        float g[256], u[256];
        piece(n0, n1, &a, &b);
        for (long n = a; n < b; n += 256) {
            long m = b - n < 256 ? b - n : 256;
            dots(Wg + n * K, x, g, m, K);
            dots(Wu + n * K, x, u, m, K);
            for (long i = 0; i < m; i++) {
                /* clamped: expf past ~88 is inf, which fast-math does not promise to handle */
                float gate = bf16_to_f32(f32_to_bf16(g[i] / (1.f + expf(fminf(-g[i], 80.f)))));
                y[n + i] = f32_to_bf16(gate * u[i]);
            }
        }
    }
    return 0;
#else
    (void)Wg; (void)Wu; (void)x; (void)y; (void)n0; (void)n1; (void)K; (void)threads;
    return -1;
#endif
}
