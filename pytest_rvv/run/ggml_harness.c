/*
 * ggml_harness: one single-precision matmul C = A x B with llama.cpp's tensor library, ggml: one MUL_MAT graph,
 * ggml_mul_mat(W, X) with W = B^T (ne0 = K, ne1 = N) and X = A (ne0 = K, ne1 = M), on ggml's CPU backend.
 *
 *   ggml_harness M K N A.f32 B.f32 C.f32 [--threads=N] [--repeat=N] [--maps=@maps.txt] [--no-timings]
 *                [--weights=q8_0]
 *
 * With --weights=q8_0, W is held as ggml's q8_0 (blocks of 32 along K, each an fp16 scale and 32 int8 values), as
 * llama.cpp holds a Q8_0 model's weights: B must hold integers in [-128, 127] and K be a multiple of 32, each block's
 * scale is 1 and its values B's, so W is B exactly; X stays f32, and ggml quantizes it to q8_0 on every call, as
 * llama.cpp does with a layer's input (that is part of a call's work, and its rounding is the result's only error).
 *
 * W and X are written straight into ggml's own host buffer (B read one row at a time) and C is written from Y's, so the
 * process holds what ggml holds: its peak RSS is ggml's, as llama.cpp's with a model's weights held once.
 *
 * The CPU backend is a module ggml loads at run time (GGML_BACKEND_DL): ggml_backend_load_all() scores each
 * libggml-cpu-*.so in its backend folder against the CPU (riscv_hwprobe) and loads the best, libggml-cpu-riscv64_v.so
 * on a CPU with V, libggml-cpu-riscv64_0.so without. On success it prints "core <variant>" (the module loaded),
 * "routine mul_mat", "session_us <n>" (loading and setting up) and "run_us <n>" (the last of --repeat graph
 * computes; not with --no-timings) and exits 0. A failure is one line on stderr, "ggml_harness: <what>: <message>",
 * and exit 2 (arguments, files) or 1 (ggml).
 *
 * No ggml header: the declarations below are ggml 0.27.0's (ggml.h, ggml-backend.h, ggml-alloc.h), and the one struct
 * passed by value is ggml_init_params; tensors are reached only through ggml's functions.
 */
#define _GNU_SOURCE
#include <link.h>
#include <stdbool.h>
#include <stddef.h>
#include <unistd.h>

#define HARNESS "ggml_harness"
#define MATMUL_WEIGHTS "q8_0"
#include "matmul_harness.h"

struct ggml_context;
struct ggml_tensor;
struct ggml_cgraph;
typedef struct ggml_backend *ggml_backend_t;
typedef struct ggml_backend_reg *ggml_backend_reg_t;
typedef struct ggml_backend_device *ggml_backend_dev_t;
typedef struct ggml_backend_buffer *ggml_backend_buffer_t;
struct ggml_init_params {
    size_t mem_size;
    void *mem_buffer;
    bool no_alloc;
};
enum { GGML_TYPE_F32 = 0, GGML_TYPE_Q8_0 = 8, GGML_BACKEND_DEVICE_TYPE_CPU = 0, GGML_STATUS_SUCCESS = 0 };
enum { QK8_0 = 32, FP16_ONE = 0x3C00 };  /* ggml-common.h: block_q8_0 is {ggml_half d; int8_t qs[QK8_0];} */
struct block_q8_0 {
    uint16_t d;
    int8_t qs[QK8_0];
};
typedef void (*ggml_log_callback)(int level, const char *text, void *user_data);
typedef void (*ggml_backend_set_n_threads_t)(ggml_backend_t, int);

struct ggml_context *ggml_init(struct ggml_init_params);
struct ggml_tensor *ggml_new_tensor_2d(struct ggml_context *, int type, int64_t ne0, int64_t ne1);
struct ggml_tensor *ggml_mul_mat(struct ggml_context *, struct ggml_tensor *a, struct ggml_tensor *b);
struct ggml_cgraph *ggml_new_graph(struct ggml_context *);
void ggml_build_forward_expand(struct ggml_cgraph *, struct ggml_tensor *);
void ggml_log_set(ggml_log_callback, void *user_data);
ggml_backend_buffer_t ggml_backend_alloc_ctx_tensors(struct ggml_context *, ggml_backend_t);
void *ggml_get_data(const struct ggml_tensor *);
bool ggml_backend_buffer_is_host(ggml_backend_buffer_t);
int ggml_backend_graph_compute(ggml_backend_t, struct ggml_cgraph *);
ggml_backend_reg_t ggml_backend_dev_backend_reg(ggml_backend_dev_t);
ggml_backend_t ggml_backend_dev_init(ggml_backend_dev_t, const char *params);
void *ggml_backend_reg_get_proc_address(ggml_backend_reg_t, const char *name);
void ggml_backend_load_all(void);
ggml_backend_dev_t ggml_backend_dev_by_type(int type);

static void quiet(int level, const char *text, void *user_data)
{
    (void)level, (void)text, (void)user_data;  /* ggml's "loaded CPU backend from ..." and the like */
}

struct found_variant {
    char *variant;
    size_t size;
};

static int cpu_module(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    struct found_variant *found = data;
    const char *at = info->dlpi_name != NULL ? strstr(info->dlpi_name, "libggml-cpu-") : NULL;
    const char *end = at != NULL ? strstr(at, ".so") : NULL;
    if (end != NULL)
        snprintf(found->variant, found->size, "%.*s", (int)(end - at - 12), at + 12);
    return 0;
}

/* The CPU module loaded into this process (its file name between "libggml-cpu-" and ".so", from the dynamic
 * linker's own list), else "unknown"; with ``copy`` /proc/self/maps is copied there (copy_maps). */
static void loaded_variant(char *variant, size_t size, const char *copy)
{
    snprintf(variant, size, "unknown");
    struct found_variant found = {variant, size};
    dl_iterate_phdr(cpu_module, &found);
    if (copy != NULL)
        copy_maps(copy);
}

/* Row ``row`` of B (N floats) into W = B^T held by ggml at ``data``: column ``row`` of W's rows, as f32 or as q8_0
 * blocks of scale 1 (then B's values must be int8). */
static void scatter_row(const float *b_row, int64_t row, int64_t k, int64_t n, void *data, int q8, const char *path)
{
    for (int64_t col = 0; col < n; col++) {
        float value = b_row[col];
        if (!q8) {
            ((float *)data)[col * k + row] = value;
            continue;
        }
        if (!(value >= -128.0f && value <= 127.0f && value == (float)(int)value))
            fail(2, path, "--weights=q8_0 holds int8 values, B holds %g", value);
        struct block_q8_0 *block = (struct block_q8_0 *)data + (col * k + row) / QK8_0;
        block->d = FP16_ONE;
        block->qs[(col * k + row) % QK8_0] = (int8_t)value;
    }
}

int main(int argc, char **argv)
{
    struct matmul_args args = parse_args(argc, argv);
    int m = args.m, k = args.k, n = args.n;
    int q8 = strcmp(args.weights, "q8_0") == 0;
    if (q8 && k % QK8_0 != 0)
        fail(2, "--weights=q8_0", "K = %d is not a multiple of q8_0's block of %d", k, QK8_0);
    FILE *fa = open_floats(args.a, (size_t)m * k), *fb = open_floats(args.b, (size_t)k * n);
    float *b_row = malloc((size_t)n * sizeof(float));
    if (b_row == NULL)
        fail(2, args.b, "out of memory");

    int64_t start = now_us();
    ggml_log_set(quiet, NULL);
    ggml_backend_load_all();
    ggml_backend_dev_t device = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU);
    ggml_backend_t backend = device != NULL ? ggml_backend_dev_init(device, NULL) : NULL;
    if (backend == NULL)
        fail(1, "ggml", "no CPU backend could be loaded from its backend folder");
    ggml_backend_set_n_threads_t set_threads = (ggml_backend_set_n_threads_t)ggml_backend_reg_get_proc_address(
        ggml_backend_dev_backend_reg(device), "ggml_backend_set_n_threads");
    if (set_threads == NULL)
        fail(1, "ggml", "the CPU backend has no ggml_backend_set_n_threads");
    set_threads(backend, args.threads);
    struct ggml_init_params params = {1 << 20, NULL, true};
    struct ggml_context *context = ggml_init(params);
    struct ggml_tensor *wt = ggml_new_tensor_2d(context, q8 ? GGML_TYPE_Q8_0 : GGML_TYPE_F32, k, n);
    struct ggml_tensor *xt = ggml_new_tensor_2d(context, GGML_TYPE_F32, k, m);
    struct ggml_tensor *yt = ggml_mul_mat(context, wt, xt);
    ggml_backend_buffer_t buffer = ggml_backend_alloc_ctx_tensors(context, backend);
    if (buffer == NULL || !ggml_backend_buffer_is_host(buffer))
        fail(1, "ggml", "cannot allocate the tensors in host memory");
    /* W, X and Y live in ggml's own (host) buffer, written and read there: the process holds what ggml holds, plus
     * one row of B, as llama.cpp holds a model's weights once (its peak RSS is then ggml's, not three copies of B) */
    for (int64_t row = 0; row < k; row++) {
        read_into(fb, args.b, b_row, (size_t)n);
        scatter_row(b_row, row, k, n, ggml_get_data(wt), q8, args.b);
    }
    fclose(fb);
    free(b_row);
    read_into(fa, args.a, ggml_get_data(xt), (size_t)m * k);
    fclose(fa);
    struct ggml_cgraph *graph = ggml_new_graph(context);
    ggml_build_forward_expand(graph, yt);
    int64_t loaded = now_us(), last = 0;

    for (int r = 0; r < args.repeat; r++) {
        int64_t t0 = now_us();
        int status = ggml_backend_graph_compute(backend, graph);
        if (status != GGML_STATUS_SUCCESS)
            fail(1, "ggml", "graph compute returned status %d", status);
        last = now_us() - t0;
    }
    write_floats(args.c, ggml_get_data(yt), (size_t)m * n);
    char variant[256];
    loaded_variant(variant, sizeof variant, args.maps);
    printf("core %s\nroutine mul_mat%s\n", variant, q8 ? " q8_0" : "");
    if (args.timings)
        printf("session_us %lld\nrun_us %lld\n", (long long)(loaded - start), (long long)last);
    return 0;
}
