/*
 * rvv_blocks.h: what the project's QEMU plugins (rvv_counter.c, rvv_memtrace.c) share.
 *
 * Every translated block is kept with an inline per-vCPU execution count (one scoreboard add per execution, no
 * callback) and its first bytes, a contiguous prefix of its code that Python (pytest_rvv.measure.counts) finds in
 * the ELF to attribute the block to a dispatch. Each plugin includes this file once; it is all `static`.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { HEAD = 16, NCLASS = 3 };

typedef struct Block {
    uint64_t vaddr;
    uint32_t n_insns;
    uint32_t classes[NCLASS]; /* rvv_counter's instruction classes; zero in the other plugins */
    uint8_t head[HEAD];
    uint32_t head_len;
    int head_full; /* an instruction did not fit: the prefix ends before it */
    struct qemu_plugin_scoreboard *execs;
    struct Block *next;
} Block;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static Block *blocks;
static const char *out_path;
static char target[32];

/* A new block for ``tb`` (not yet kept: see block_keep). */
static inline Block *block_new(struct qemu_plugin_tb *tb)
{
    Block *b = calloc(1, sizeof(*b));
    b->vaddr = qemu_plugin_tb_vaddr(tb);
    b->n_insns = qemu_plugin_tb_n_insns(tb);
    b->execs = qemu_plugin_scoreboard_new(sizeof(uint64_t));
    return b;
}

/* Read ``insn``'s bytes into ``bytes`` (HEAD of them at most) and add them to the block's prefix while the prefix
 * stays contiguous; returns the instruction's size. */
static inline size_t block_take(Block *b, struct qemu_plugin_insn *insn, uint8_t bytes[HEAD])
{
    memset(bytes, 0, HEAD);
    size_t size = qemu_plugin_insn_data(insn, bytes, HEAD);
    if (!b->head_full && b->head_len + size <= HEAD) {
        memcpy(b->head + b->head_len, bytes, size);
        b->head_len += size;
    } else {
        b->head_full = 1;
    }
    return size;
}

/* Count the block's executions per vCPU (inline) and keep it for the report at exit. */
static inline void block_keep(Block *b, struct qemu_plugin_tb *tb)
{
    qemu_plugin_u64 counter = {b->execs, 0};
    qemu_plugin_register_vcpu_tb_exec_inline_per_vcpu(tb, QEMU_PLUGIN_INLINE_ADD_U64, counter, 1);
    pthread_mutex_lock(&lock);
    b->next = blocks;
    blocks = b;
    pthread_mutex_unlock(&lock);
}

/* The block's line: tb <vaddr> <n_insns> <execs over all vCPUs> <classes> <first bytes hex> */
static inline void block_write(FILE *f, const Block *b)
{
    qemu_plugin_u64 counter = {b->execs, 0};
    fprintf(f, "tb %" PRIx64 " %u %" PRIu64 " %u %u %u ", b->vaddr, b->n_insns, qemu_plugin_u64_sum(counter),
            b->classes[0], b->classes[1], b->classes[2]);
    for (uint32_t i = 0; i < b->head_len; i++) {
        fprintf(f, "%02x", b->head[i]);
    }
    fputc('\n', f);
}

/* The block's executions per vCPU (in user mode, per guest thread): tv <vaddr> <vcpu> <execs>, one line per vCPU
 * that ran it, and none at all when only vCPU 0 (the main thread) did: the blocks the main thread alone ran (nearly
 * all of a local-sync run's) cost no line. */
static inline void block_write_vcpus(FILE *f, const Block *b, int vcpus)
{
    uint64_t *main_execs = qemu_plugin_scoreboard_find(b->execs, 0);
    qemu_plugin_u64 counter = {b->execs, 0};
    if (*main_execs == qemu_plugin_u64_sum(counter)) {
        return;
    }
    for (int cpu = 0; cpu < vcpus; cpu++) {
        uint64_t *execs = qemu_plugin_scoreboard_find(b->execs, cpu);
        if (*execs) {
            fprintf(f, "tv %" PRIx64 " %d %" PRIu64 "\n", b->vaddr, cpu, *execs);
        }
    }
}

/* A register's value (the first 8 bytes QEMU gives), with a buffer per host thread. */
static inline uint64_t read_reg(struct qemu_plugin_register *reg)
{
    static __thread GByteArray *buf;
    if (!buf) {
        buf = g_byte_array_new();
    }
    uint64_t value = 0;
    g_byte_array_set_size(buf, 0);
    int n = qemu_plugin_read_register(reg, buf);
    if (n > 0) {
        memcpy(&value, buf->data, n < 8 ? (size_t)n : 8);
    }
    return value;
}

/* Open the out= file for the report at exit; NULL, and one line on QEMU's output, when it cannot be. */
static inline FILE *open_out(const char *plugin)
{
    FILE *f = fopen(out_path, "w");
    if (!f) {
        char line[96];
        snprintf(line, sizeof(line), "%s: cannot open the out= file\n", plugin);
        qemu_plugin_outs(line);
    }
    return f;
}
