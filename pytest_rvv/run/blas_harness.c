/*
 * blas_harness: one single-precision matmul C = A x B with a BLAS library: cblas_sgemm (row-major, no transpose), or
 * at M = 1 cblas_sgemv (C's one row = B^T a: the routine a BLAS user calls for a vector times a matrix).
 *
 * The peer of a kernel cell's iree-run-module on a riscv64 machine (or under qemu-riscv64 -L <sysroot>): the same
 * seeded A and B, as raw little-endian float32 files, one thread unless asked.
 *
 *   blas_harness M K N A.f32 B.f32 C.f32 [--threads=N] [--repeat=N] [--library=PATH] [--maps=@maps.txt]
 *                [--no-timings]
 *
 * On success it prints "core <name>" (the kernel set OpenBLAS chose at load, from the CPU's hwcap and vlenb),
 * "session_us <n>" (loading the library) and "run_us <n>" (the last of --repeat calls; not with --no-timings, for
 * counted runs: a time's digits take a time-dependent number of instructions to print) and exits 0. --maps copies
 * /proc/self/maps at the end (each library's guest addresses, which executed counts are attributed by). A failure is
 * one line on stderr, "blas_harness: <what>: <message>", and exit 2 (bad arguments or files) or 1 (the library).
 *
 * Why sgemv at M = 1: OpenBLAS 0.3.29 forwards a one-row sgemm to sgemv only where its Makefile.system sets
 * GEMM_GEMV_FORWARD (ARCH "riscv", never riscv64's "riscv64"), so on riscv64 sgemm packs all of B (K x N, scalar
 * C copies) on every call: measured 19.3 M instructions per call at 1x2048x8192, 1.15 per element of B.
 *
 * The library is loaded with dlopen after OPENBLAS_NUM_THREADS is set to --threads, so a one-thread run starts no
 * worker thread (an idle worker's spinning would make executed counts differ from run to run). The harness declares
 * the two functions it calls itself (cblas.h's signatures, OpenBLAS's 32-bit blasint): it needs no header package.
 */
#include <dlfcn.h>

#ifndef BLAS_LIBRARY
#define BLAS_LIBRARY "/usr/lib/riscv64-linux-gnu/openblas-pthread/libopenblas.so.0"
#endif
#define HARNESS "blas_harness"
#define MATMUL_LIBRARY BLAS_LIBRARY
#include "matmul_harness.h"

enum { ROW_MAJOR = 101, NO_TRANS = 111 };  /* CblasRowMajor, CblasNoTrans */
typedef void (*sgemm_fn)(int order, int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a,
                         int lda, const float *b, int ldb, float beta, float *c, int ldc);
typedef void (*sgemv_fn)(int order, int trans, int m, int n, float alpha, const float *a, int lda, const float *x,
                         int incx, float beta, float *y, int incy);
typedef char *(*corename_fn)(void);
typedef void (*set_threads_fn)(int);
enum { TRANS = 112 };  /* CblasTrans */

int main(int argc, char **argv)
{
    struct matmul_args args = parse_args(argc, argv);
    int m = args.m, k = args.k, n = args.n;
    float *a = read_floats(args.a, (size_t)m * k), *b = read_floats(args.b, (size_t)k * n);
    float *c = calloc((size_t)m * n, sizeof(float));
    if (c == NULL)
        fail(2, args.c, "out of memory");
    char threads[16];
    snprintf(threads, sizeof threads, "%d", args.threads);
    const char *library = args.library;

    setenv("OPENBLAS_NUM_THREADS", threads, 1);  /* read when the library loads: no idle workers at one thread */
    int64_t start = now_us();
    void *handle = dlopen(library, RTLD_NOW | RTLD_LOCAL);
    if (handle == NULL)
        fail(1, library, "%s", dlerror());
    sgemm_fn sgemm = (sgemm_fn)dlsym(handle, "cblas_sgemm");
    sgemv_fn sgemv = (sgemv_fn)dlsym(handle, "cblas_sgemv");
    corename_fn corename = (corename_fn)dlsym(handle, "openblas_get_corename");
    if (sgemm == NULL || sgemv == NULL)
        fail(1, library, "no cblas_sgemm or cblas_sgemv");
    set_threads_fn set_threads = (set_threads_fn)dlsym(handle, "openblas_set_num_threads");
    if (args.threads > 1 && set_threads != NULL)
        set_threads(args.threads);
    int64_t loaded = now_us();

    int64_t last = 0;
    for (int r = 0; r < args.repeat; r++) {
        int64_t t0 = now_us();
        if (m == 1)  /* c = B^T a: B is K x N row-major */
            sgemv(ROW_MAJOR, TRANS, k, n, 1.0f, b, n, a, 1, 0.0f, c, 1);
        else
            sgemm(ROW_MAJOR, NO_TRANS, NO_TRANS, m, n, k, 1.0f, a, k, b, n, 0.0f, c, n);
        last = now_us() - t0;
    }
    write_floats(args.c, c, (size_t)m * n);
    if (args.maps != NULL)
        copy_maps(args.maps);
    printf("core %s\nroutine %s\n", corename != NULL ? corename() : "unknown", m == 1 ? "sgemv" : "sgemm");
    if (args.timings)
        printf("session_us %lld\nrun_us %lld\n", (long long)(loaded - start), (long long)last);
    return 0;
}
