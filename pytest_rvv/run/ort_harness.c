/*
 * ort_harness: run one ONNX model with ONNX Runtime's C API on .npy inputs, write its outputs as .npy.
 *
 * The peer of iree-run-module on a riscv64 machine (or under qemu-riscv64 -L <sysroot>): the same prepared model,
 * the same seeded inputs, one intra-op thread unless asked.
 *
 *   ort_harness MODEL.onnx [--input=@in_0.npy ...] [--output=@out_0.npy ...] [--threads=N]
 *               [--optimizations=all|extended|basic|disable] [--repeat=N] [--library=libonnxruntime.so.1.21]
 *               [--maps=@maps.txt] [--no-timings]
 *
 * Inputs bind to the model's inputs in order; the i-th --output receives the model's i-th output (--repeat=0 loads
 * the model, makes no call and writes no output: what a call adds is a one-call run less it). On success it
 * prints "session_us <n>" (creating the session: loading and optimizing the model) and "run_us <n>" (the last of
 * --repeat runs; not with --no-timings, for counted runs) and exits 0. --maps copies /proc/self/maps at the end (where each library was loaded: under QEMU,
 * the guest's addresses, which executed counts are attributed by). Any failure is one line on stderr, "ort_harness: <model>: <what>: <message>", and a
 * nonzero exit: 2 for bad arguments or files, 1 for ONNX Runtime errors.
 *
 * ONNX Runtime is loaded with dlopen (its soname by default), so the harness needs only libc to start and a
 * missing library is the same one line. Built by pytest_rvv/run/ort_harness.py against the sysroot's headers.
 */
#include <dlfcn.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "onnxruntime_c_api.h"

#ifndef ORT_LIBRARY
#define ORT_LIBRARY "libonnxruntime.so.1.21"
#endif

enum { MAX_TENSORS = 64, MAX_DIMS = 16 };

static const char *model_path = "(no model)";
static const OrtApi *ort;

static void release_stderr(void);

static void fail(int code, const char *what, const char *fmt, ...)
{
    char message[2048];
    va_list args;
    va_start(args, fmt);
    vsnprintf(message, sizeof(message), fmt, args);
    va_end(args);
    for (char *c = message; *c; c++) { /* one line, whatever the library said */
        if (*c == '\n' || *c == '\r') {
            *c = ' ';
        }
    }
    release_stderr();
    fprintf(stderr, "ort_harness: %s: %s: %s\n", model_path, what, message);
    exit(code);
}

static void check(OrtStatus *status, const char *what)
{
    if (status != NULL) {
        fail(1, what, "%s", ort->GetErrorMessage(status));
    }
}

static int64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* .npy element types: the descr's kind and size, and ONNX's element type */
static const struct {
    const char *descr;
    size_t size;
    ONNXTensorElementDataType type;
} TYPES[] = {
    {"f4", 4, ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT},   {"f8", 8, ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE},
    {"f2", 2, ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16}, {"i1", 1, ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8},
    {"u1", 1, ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT8},   {"i2", 2, ONNX_TENSOR_ELEMENT_DATA_TYPE_INT16},
    {"u2", 2, ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT16},  {"i4", 4, ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32},
    {"u4", 4, ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT32},  {"i8", 8, ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64},
    {"u8", 8, ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT64},  {"b1", 1, ONNX_TENSOR_ELEMENT_DATA_TYPE_BOOL},
};

typedef struct {
    ONNXTensorElementDataType type;
    size_t size; /* bytes per element */
    size_t ndim;
    int64_t shape[MAX_DIMS];
    void *data;
    size_t bytes;
} Array;

static const char *header_value(const char *header, const char *key, const char *path)
{
    const char *at = strstr(header, key);
    if (at == NULL) {
        fail(2, path, "not a .npy file this harness reads (no %s in its header)", key);
    }
    at += strlen(key);
    while (*at == ' ' || *at == ':' || *at == '\'' || *at == '"') {
        at++;
    }
    return at;
}

static Array read_npy(const char *path)
{
    Array array = {0};
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        fail(2, path, "cannot open it");
    }
    unsigned char magic[10];
    if (fread(magic, 1, 10, f) != 10 || memcmp(magic, "\x93NUMPY", 6) != 0) {
        fail(2, path, "not a .npy file");
    }
    size_t header_len = magic[8] | (magic[9] << 8);
    if (magic[6] >= 2) { /* format 2.0 and 3.0: a 4-byte header length */
        unsigned char more[2];
        if (fread(more, 1, 2, f) != 2) {
            fail(2, path, "truncated .npy header");
        }
        header_len |= ((size_t)more[0] << 16) | ((size_t)more[1] << 24);
    }
    char *header = calloc(1, header_len + 1);
    if (header == NULL || fread(header, 1, header_len, f) != header_len) {
        fail(2, path, "truncated .npy header");
    }
    const char *descr = header_value(header, "descr", path);
    if (descr[0] == '>') {
        fail(2, path, "big-endian .npy data is not supported");
    }
    if (descr[0] == '<' || descr[0] == '|' || descr[0] == '=') {
        descr++;
    }
    for (size_t i = 0; i < sizeof(TYPES) / sizeof(TYPES[0]); i++) {
        if (strncmp(descr, TYPES[i].descr, 2) == 0 && (descr[2] == '\'' || descr[2] == '"')) {
            array.type = TYPES[i].type;
            array.size = TYPES[i].size;
        }
    }
    if (array.size == 0) {
        fail(2, path, "unsupported .npy dtype %.8s", descr);
    }
    if (strncmp(header_value(header, "fortran_order", path), "True", 4) == 0) {
        fail(2, path, "Fortran-ordered .npy data is not supported");
    }
    const char *shape = header_value(header, "shape", path);
    if (*shape != '(') {
        fail(2, path, "bad .npy shape");
    }
    shape++;
    size_t count = 1;
    while (*shape != ')') {
        while (*shape == ' ' || *shape == ',') {
            shape++;
        }
        if (*shape == ')') {
            break;
        }
        char *end;
        long long dim = strtoll(shape, &end, 10);
        if (end == shape || dim < 0 || array.ndim == MAX_DIMS) {
            fail(2, path, "bad .npy shape");
        }
        array.shape[array.ndim++] = dim;
        count *= (size_t)dim;
        shape = end;
    }
    free(header);
    array.bytes = count * array.size;
    array.data = malloc(array.bytes ? array.bytes : 1);
    if (array.data == NULL || fread(array.data, 1, array.bytes, f) != array.bytes) {
        fail(2, path, "truncated .npy data (expected %zu bytes)", array.bytes);
    }
    fclose(f);
    return array;
}

static void write_npy(const char *path, ONNXTensorElementDataType type, const int64_t *shape, size_t ndim,
                      const void *data, size_t count)
{
    const char *descr = NULL;
    size_t size = 0;
    for (size_t i = 0; i < sizeof(TYPES) / sizeof(TYPES[0]); i++) {
        if (TYPES[i].type == type) {
            descr = TYPES[i].descr;
            size = TYPES[i].size;
        }
    }
    if (descr == NULL) {
        fail(2, path, "the model's output has element type %d, which .npy output does not support", (int)type);
    }
    char dims[512] = "";
    size_t used = 0;
    for (size_t i = 0; i < ndim; i++) {
        used += snprintf(dims + used, sizeof(dims) - used, "%lld,%s", (long long)shape[i],
                         i + 1 < ndim ? " " : "");
    }
    if (ndim > 1) { /* (2, 3) rather than (2, 3,) */
        dims[used - 1] = '\0';
    }
    char header[1024];
    int len = snprintf(header, sizeof(header), "{'descr': '%c%s', 'fortran_order': False, 'shape': (%s), }",
                       size == 1 ? '|' : '<', descr, dims);
    int total = 10 + len + 1;
    int pad = (64 - total % 64) % 64;
    memset(header + len, ' ', (size_t)pad);
    header[len + pad] = '\n';
    len += pad + 1;
    FILE *f = fopen(path, "wb");
    if (f == NULL) {
        fail(2, path, "cannot write it");
    }
    unsigned char magic[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(len & 0xff),
                               (unsigned char)(len >> 8)};
    if (fwrite(magic, 1, 10, f) != 10 || fwrite(header, 1, (size_t)len, f) != (size_t)len ||
        fwrite(data, size, count, f) != count || fclose(f) != 0) {
        fail(2, path, "cannot write it");
    }
}

/* Debian's libonnx registers some ONNX schemas twice and says so on stderr when ONNX Runtime is loaded: a
 * "Schema error: Trying to register schema with name ... already registered" line (and a blank one) per schema,
 * about 500 lines, harmless, when the first session is created. stderr is caught from loading the library to
 * creating the session, and everything else in it is passed on. */
static FILE *caught;
static int saved_stderr = -1;

static void catch_stderr(void)
{
    fflush(stderr);
    caught = tmpfile();
    saved_stderr = dup(2);
    if (caught == NULL || saved_stderr < 0 || dup2(fileno(caught), 2) < 0) {
        caught = NULL;
    }
}

static void release_stderr(void)
{
    if (caught == NULL) {
        return;
    }
    fflush(stderr);
    dup2(saved_stderr, 2);
    close(saved_stderr);
    rewind(caught);
    char line[4096];
    while (fgets(line, sizeof(line), caught) != NULL) {
        if (strncmp(line, "Schema error: ", 14) != 0 && strspn(line, " \r\n") != strlen(line)) {
            fputs(line, stderr);
        }
    }
    fclose(caught);
    caught = NULL;
}

/* /proc/self/maps copied to ``to`` with one read and one write (as run/matmul_harness.h's copy_maps, which this
 * harness does not include): under qemu-user the file can hold a line more or less from run to run, and read in blocks
 * its length would cost guest instructions of memcpy. */
static void copy_maps(const char *to)
{
    static char text[1 << 22];
    int in = open("/proc/self/maps", O_RDONLY), out = open(to, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (in < 0 || out < 0) {
        fail(2, to, "cannot copy /proc/self/maps there");
    }
    ssize_t got, length = 0;
    while ((got = read(in, text + length, sizeof text - (size_t)length)) > 0) {
        length += got;
    }
    if (got < 0 || length == (ssize_t)sizeof text || write(out, text, (size_t)length) != length || close(out) != 0) {
        fail(2, to, "cannot copy /proc/self/maps there");
    }
    close(in);
}

static const char *file_argument(const char *arg, const char *flag)
{
    size_t n = strlen(flag);
    if (strncmp(arg, flag, n) != 0) {
        return NULL;
    }
    return arg[n] == '@' ? arg + n + 1 : arg + n;
}

int main(int argc, char **argv)
{
    const char *inputs[MAX_TENSORS], *outputs[MAX_TENSORS];
    size_t n_inputs = 0, n_outputs = 0;
    int threads = 1, repeat = 1, timings = 1;
    const char *library = ORT_LIBRARY, *maps = NULL;
    GraphOptimizationLevel level = ORT_ENABLE_ALL;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i], *value;
        if ((value = file_argument(arg, "--input=")) != NULL) {
            if (n_inputs == MAX_TENSORS) {
                fail(2, "arguments", "more than %d inputs", MAX_TENSORS);
            }
            inputs[n_inputs++] = value;
        } else if ((value = file_argument(arg, "--output=")) != NULL) {
            if (n_outputs == MAX_TENSORS) {
                fail(2, "arguments", "more than %d outputs", MAX_TENSORS);
            }
            outputs[n_outputs++] = value;
        } else if (strncmp(arg, "--threads=", 10) == 0) {
            threads = atoi(arg + 10);
        } else if (strcmp(arg, "--no-timings") == 0) {
            timings = 0;
        } else if (strncmp(arg, "--repeat=", 9) == 0) {
            repeat = atoi(arg + 9);
        } else if ((value = file_argument(arg, "--maps=")) != NULL) {
            maps = value;
        } else if (strncmp(arg, "--library=", 10) == 0) {
            library = arg + 10;
        } else if (strncmp(arg, "--optimizations=", 16) == 0) {
            const char *name = arg + 16;
            level = !strcmp(name, "all")        ? ORT_ENABLE_ALL
                    : !strcmp(name, "extended") ? ORT_ENABLE_EXTENDED
                    : !strcmp(name, "basic")    ? ORT_ENABLE_BASIC
                    : !strcmp(name, "disable")  ? ORT_DISABLE_ALL
                                                : (fail(2, "arguments", "unknown --optimizations=%s", name),
                                                   ORT_ENABLE_ALL);
        } else if (arg[0] == '-') {
            fail(2, "arguments", "unknown argument %s", arg);
        } else {
            model_path = arg;
        }
    }
    if (threads < 1 || repeat < 0) {
        fail(2, "arguments", "--threads takes a number >= 1, --repeat a number >= 0");
    }
    if (!strcmp(model_path, "(no model)")) {
        fail(2, "arguments", "usage: ort_harness MODEL.onnx [--input=@in.npy ...] [--output=@out.npy ...] "
                             "[--threads=N] [--optimizations=all|extended|basic|disable] [--repeat=N]");
    }

    catch_stderr();
    void *handle = dlopen(library, RTLD_NOW | RTLD_LOCAL);
    if (handle == NULL) {
        fail(2, "loading ONNX Runtime", "%s", dlerror());
    }
    const OrtApiBase *(*get_api_base)(void) = (const OrtApiBase *(*)(void))dlsym(handle, "OrtGetApiBase");
    if (get_api_base == NULL) {
        fail(2, "loading ONNX Runtime", "%s has no OrtGetApiBase", library);
    }
    ort = get_api_base()->GetApi(ORT_API_VERSION);
    if (ort == NULL) {
        fail(2, "loading ONNX Runtime", "%s (ONNX Runtime %s) lacks C API version %d", library,
             get_api_base()->GetVersionString(), ORT_API_VERSION);
    }

    OrtEnv *env;
    OrtSessionOptions *options;
    OrtSession *session;
    check(ort->CreateEnv(ORT_LOGGING_LEVEL_ERROR, "pytest-rvv", &env), "creating the environment");
    check(ort->CreateSessionOptions(&options), "session options");
    check(ort->SetIntraOpNumThreads(options, threads), "session options");
    check(ort->SetInterOpNumThreads(options, 1), "session options");
    check(ort->SetSessionExecutionMode(options, ORT_SEQUENTIAL), "session options");
    check(ort->SetSessionGraphOptimizationLevel(options, level), "session options");
    check(ort->AddSessionConfigEntry(options, "session.intra_op.allow_spinning", "0"), "session options");
    int64_t start = now_us();
    check(ort->CreateSession(env, model_path, options, &session), "loading the model");
    int64_t session_us = now_us() - start;
    release_stderr();

    OrtAllocator *allocator;
    check(ort->GetAllocatorWithDefaultOptions(&allocator), "allocator");
    size_t model_inputs, model_outputs;
    check(ort->SessionGetInputCount(session, &model_inputs), "reading the model's inputs");
    check(ort->SessionGetOutputCount(session, &model_outputs), "reading the model's outputs");
    if (model_inputs != n_inputs) {
        fail(2, "arguments", "the model has %zu inputs, %zu --input given", model_inputs, n_inputs);
    }
    if (n_outputs > model_outputs || model_outputs > MAX_TENSORS) {
        fail(2, "arguments", "the model has %zu outputs, %zu --output given", model_outputs, n_outputs);
    }
    char *input_names[MAX_TENSORS], *output_names[MAX_TENSORS];
    for (size_t i = 0; i < model_inputs; i++) {
        check(ort->SessionGetInputName(session, i, allocator, &input_names[i]), "reading the model's inputs");
    }
    for (size_t i = 0; i < model_outputs; i++) {
        check(ort->SessionGetOutputName(session, i, allocator, &output_names[i]), "reading the model's outputs");
    }

    OrtMemoryInfo *memory;
    check(ort->CreateCpuMemoryInfo(OrtArenaAllocator, OrtMemTypeDefault, &memory), "memory info");
    OrtValue *input_values[MAX_TENSORS];
    for (size_t i = 0; i < n_inputs; i++) {
        Array array = read_npy(inputs[i]);
        check(ort->CreateTensorWithDataAsOrtValue(memory, array.data, array.bytes, array.shape, array.ndim,
                                                  array.type, &input_values[i]),
              inputs[i]);
    }

    OrtValue *output_values[MAX_TENSORS];
    int64_t run_us = 0;
    for (int r = 0; r < repeat; r++) {
        for (size_t i = 0; i < model_outputs; i++) {
            output_values[i] = NULL;
        }
        start = now_us();
        check(ort->Run(session, NULL, (const char *const *)input_names, (const OrtValue *const *)input_values,
                       n_inputs, (const char *const *)output_names, model_outputs, output_values),
              "running the model");
        run_us = now_us() - start;
        if (r + 1 < repeat) {
            for (size_t i = 0; i < model_outputs; i++) {
                ort->ReleaseValue(output_values[i]);
            }
        }
    }

    for (size_t i = 0; repeat > 0 && i < n_outputs; i++) { /* --repeat=0 loads the model and makes no call */
        OrtTensorTypeAndShapeInfo *info;
        ONNXTensorElementDataType type;
        size_t ndim, count;
        int64_t shape[MAX_DIMS];
        void *data;
        int is_tensor = 0;
        check(ort->IsTensor(output_values[i], &is_tensor), output_names[i]);
        if (!is_tensor) {
            fail(2, output_names[i], "is not a tensor (a sequence or map): .npy output cannot hold it");
        }
        check(ort->GetTensorTypeAndShape(output_values[i], &info), output_names[i]);
        check(ort->GetTensorElementType(info, &type), output_names[i]);
        check(ort->GetDimensionsCount(info, &ndim), output_names[i]);
        if (ndim > MAX_DIMS) {
            fail(2, output_names[i], "has %zu dimensions (at most %d)", ndim, MAX_DIMS);
        }
        check(ort->GetDimensions(info, shape, ndim), output_names[i]);
        check(ort->GetTensorShapeElementCount(info, &count), output_names[i]);
        check(ort->GetTensorMutableData(output_values[i], &data), output_names[i]);
        write_npy(outputs[i], type, shape, ndim, data, count);
        ort->ReleaseTensorTypeAndShapeInfo(info);
    }
    if (maps != NULL) {
        copy_maps(maps);
    }
    if (timings) { /* off in counted runs: printing a time's digits executes a time-dependent number of instructions */
        printf("session_us %lld\nrun_us %lld\n", (long long)session_us, (long long)run_us);
    }
    return 0;
}
