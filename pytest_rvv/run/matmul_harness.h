/*
 * matmul_harness.h: what every matmul peer harness shares (run/matmul_peer.py builds each with this beside it): its
 * one-line failures, its clock, its raw float32 files and its one command line,
 *
 *   HARNESS M K N A.f32 B.f32 C.f32 [--threads=N] [--repeat=N] [--maps=@maps.txt] [--no-timings] [--library=PATH]
 *           [--weights=TYPE]
 *
 * (--library only where the harness defines MATMUL_LIBRARY, its default; --weights only where it defines
 * MATMUL_WEIGHTS, the one type it takes besides f32). Define HARNESS (the program's name in its messages) before
 * including it.
 */
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void fail(int code, const char *what, const char *fmt, ...)
{
    va_list args;
    fprintf(stderr, HARNESS ": %s: ", what);
    va_start(args, fmt);
    vfprintf(stderr, fmt, args);
    va_end(args);
    fputc('\n', stderr);
    exit(code);
}

static int64_t now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000 + t.tv_nsec / 1000;
}

/* ``path`` opened for reading ``count`` floats, or one line when it cannot be or holds another number of them. */
static FILE *open_floats(const char *path, size_t count)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        fail(2, path, "cannot open");
    long size = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    if (size < 0 || fseek(f, 0, SEEK_SET) != 0)
        fail(2, path, "cannot read");
    if ((size_t)size != count * sizeof(float))
        fail(2, path, "holds %s floats than the shape's %zu", (size_t)size > count * sizeof(float) ? "more" : "fewer",
             count);
    return f;
}

/* The next ``count`` floats of ``f`` (opened by open_floats) into ``data``. */
static void read_into(FILE *f, const char *path, float *data, size_t count)
{
    if (fread(data, sizeof(float), count, f) != count)
        fail(2, path, "cannot read");
}

static inline float *read_floats(const char *path, size_t count)
{
    FILE *f = open_floats(path, count);
    float *data = malloc(count * sizeof(float));
    if (data == NULL)
        fail(2, path, "out of memory");
    read_into(f, path, data, count);
    fclose(f);
    return data;
}

static void write_floats(const char *path, const float *data, size_t count)
{
    FILE *f = fopen(path, "wb");
    if (f == NULL || fwrite(data, sizeof(float), count, f) != count || fclose(f) != 0)
        fail(2, path, "cannot write");
}

/* /proc/self/maps copied to ``to`` with one read and one write. Under qemu-user that file lists the guest's mappings as
 * QEMU finds them on the host, whose count can differ from run to run under load (a line more or less): read line by
 * line it once moved a counted run by 24 instructions of memchr, in blocks by a few of memcpy. Copied whole, its
 * length costs no guest instruction. */
static void copy_maps(const char *to)
{
    static char text[1 << 22];
    int in = open("/proc/self/maps", O_RDONLY), out = open(to, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (in < 0 || out < 0)
        fail(2, to, "cannot copy /proc/self/maps");
    ssize_t got, length = 0;
    while ((got = read(in, text + length, sizeof text - (size_t)length)) > 0)
        length += got;
    if (got < 0 || length == (ssize_t)sizeof text || write(out, text, (size_t)length) != length || close(out) != 0)
        fail(2, to, "cannot copy /proc/self/maps");
    close(in);
}

static const char *flag_value(const char *arg, const char *flag)
{
    size_t n = strlen(flag);
    return strncmp(arg, flag, n) == 0 ? arg + n : NULL;
}

/* ``text`` as an integer from ``lowest`` (0 or 1) up to 2^30, or one line naming ``what``. */
static int integer(const char *text, const char *what, long lowest)
{
    char *end;
    long value = strtol(text, &end, 10);
    if (*text == '\0' || *end != '\0' || value < lowest || value > 1 << 30)
        fail(2, what, lowest ? "'%s' is not a positive integer" : "'%s' is not a count (0 or more)", text);
    return (int)value;
}

struct matmul_args {
    int m, k, n, threads, repeat, timings;
    const char *a, *b, *c, *maps, *library;
#ifdef MATMUL_WEIGHTS
    const char *weights;  /* how B is held: "f32", or one of MATMUL_WEIGHTS */
#endif
};

static struct matmul_args parse_args(int argc, char **argv)
{
#ifdef MATMUL_LIBRARY
    const char *library = MATMUL_LIBRARY, *library_flag = " [--library=PATH]";
#else
    const char *library = NULL, *library_flag = "";
#endif
#ifdef MATMUL_WEIGHTS
    const char *weights_flag = " [--weights=" MATMUL_WEIGHTS "]";
#else
    const char *weights_flag = "";
#endif
    if (argc < 7)
        fail(2, "usage", HARNESS " M K N A.f32 B.f32 C.f32 [--threads=N] [--repeat=N] [--maps=@maps.txt] "
                         "[--no-timings]%s%s", library_flag, weights_flag);
    struct matmul_args args = {integer(argv[1], "M", 1), integer(argv[2], "K", 1), integer(argv[3], "N", 1), 1, 1, 1,
                               argv[4], argv[5], argv[6], NULL, library
#ifdef MATMUL_WEIGHTS
                               , "f32"
#endif
                               };
    const char *value;
    for (int i = 7; i < argc; i++) {
        if ((value = flag_value(argv[i], "--threads=")) != NULL)
            args.threads = integer(value, "--threads", 1);
        else if ((value = flag_value(argv[i], "--repeat=")) != NULL)
            args.repeat = integer(value, "--repeat", 0);  /* 0: load the library and stop (a traced run's baseline) */
        else if ((value = flag_value(argv[i], "--maps=@")) != NULL)
            args.maps = value;
        else if (strcmp(argv[i], "--no-timings") == 0)
            args.timings = 0;
        else if (library != NULL && (value = flag_value(argv[i], "--library=")) != NULL)
            args.library = value;
#ifdef MATMUL_WEIGHTS
        else if ((value = flag_value(argv[i], "--weights=")) != NULL) {
            if (strcmp(value, "f32") != 0 && strcmp(value, MATMUL_WEIGHTS) != 0)
                fail(2, "--weights", "'%s' is not f32 or " MATMUL_WEIGHTS, value);
            args.weights = value;
        }
#endif
        else
            fail(2, argv[i], "unknown argument");
    }
    return args;
}
