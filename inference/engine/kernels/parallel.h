/* Splitting a kernel call's independent pieces (output columns, batch rows) across
 * torch's threads. OpenMP, because a region's threads are torch's own (its libgomp, which
 * a kernel's soname resolves to once torch is loaded) and wake in about a microsecond,
 * where handing a piece to a Python thread pool cost tens: too much for the small calls of
 * a decode step. Built without OpenMP, a call runs on its calling thread only. */
#ifndef TANDEM_PARALLEL_H
#define TANDEM_PARALLEL_H
#ifdef _OPENMP
#include <omp.h>
#endif

static inline int built_parallel(void) {
#ifdef _OPENMP
    return 1;
#else
    return 0;
#endif
}

/* `threads` where n pieces give each at least `least`, else 1. */
static inline int threads_for(int threads, long n, long least) {
    return threads > 1 && n >= 2 * least ? threads : 1;
}

/* This thread's contiguous share [*a, *b) of [n0, n1) inside a region (all of it outside one). */
static inline void piece(long n0, long n1, long *a, long *b) {
#ifdef _OPENMP
    long t = omp_get_thread_num(), T = omp_get_num_threads();
#else
    long t = 0, T = 1;
#endif
    *a = n0 + (n1 - n0) * t / T;
    *b = n0 + (n1 - n0) * (t + 1) / T;
}
#endif
