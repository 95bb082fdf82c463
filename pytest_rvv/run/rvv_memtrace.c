/*
 * rvv_memtrace: a QEMU TCG plugin counting the memory traffic of every instruction, and feeding its addresses
 * through a set-associative LRU model of a core's L1 data cache and L2.
 *
 * Two ways in, both adding to the accessing instruction's record and, with cache=, running the bytes through the
 * cache model; totals are kept per instruction address and written at exit:
 * - on_vector: unmasked unit-stride (segment and mask loads/stores included) and whole-register loads/stores touch
 *   one contiguous range that the instruction's encoding, rs1, vl and vlenb fix, so one callback per executed
 *   instruction computes it (before the instruction runs: vl is the vl it uses). QEMU 10 would otherwise call
 *   on_access once per element (per byte for vsNr.v), and that callback is the plugin's whole cost. Measured on
 *   mobilenetv3-cls at zvl512b (2.9 G element accesses in its dispatches; 2 shared cores, so ranges): without a
 *   plugin 1.7-3.7 s, rvv_counter 1.8-5.1 s, this plugin with the X60 cache model 4.7-11.0 s, and with every
 *   access per element (per-element=on) 94-169 s.
 * - on_access: every other access (scalar, strided, indexed, masked and fault-only-first vector accesses), one
 *   callback per element as QEMU reports it.
 *
 * Each instruction's kind is decoded once, at translation: vector loads/stores are LOAD-FP 0x07 / STORE-FP 0x27
 * with width 0, 5, 6 or 7; their mop field (bits 27:26) is 00 unit-stride, 01 indexed-unordered, 10 strided,
 * 11 indexed-ordered, and a unit-stride access with lumop/sumop (bits 24:20) 01000 is whole-register. Every other
 * instruction that accesses memory is scalar (loads, stores, FP loads/stores, atomics, compressed forms).
 *
 * The cache model (cache=L1SETS:L1WAYS:L2SETS:L2WAYS:LINE, all powers of two): write-back, write-allocate, LRU
 * in each set; an L1 miss reads the line from L2 (an L2 miss there is a DRAM read), a dirty L1 victim is written
 * into L2 (allocated without a read when absent), a dirty L2 victim is a DRAM write. Events are charged to the
 * instruction whose access caused them. Guest virtual addresses index both levels (user mode has no physical
 * addresses); dirty lines still cached at exit are not written back. One model serves all guest threads (under a
 * lock when more than one runs): per-core L1s are not modelled.
 *
 * Arguments: out=FILE (required), cache=L1SETS:L1WAYS:L2SETS:L2WAYS:LINE (optional), per-element=on (every access
 * through on_access: slow, the reference on_vector is tested against).
 * Output (text, at exit):
 *   rvv-memtrace 1 <target_name>
 *   cache <l1 sets> <l1 ways> <l2 sets> <l2 ways> <line bytes>        (with cache=)
 *   tb <vaddr> <n_insns> <execs> 0 0 0 <first bytes hex>             (as rvv_counter's, to locate libraries)
 *   mi <vaddr> <kind> <accesses> <bytes loaded> <bytes stored> <l1 misses> <l2 misses> <l1 writebacks>
 *      <l2 writebacks>                                                (one per instruction that accessed memory)
 *   kind: scalar | unit | strided | indexed | whole
 * Python (pytest_rvv.measure.traffic) attributes the instructions to dispatches.
 */
#include "qemu_plugin_mem_api.h"
#include "rvv_blocks.h"

PLUGIN_EXPORT int qemu_plugin_version = 3;

enum { SCALAR, UNIT, STRIDED, INDEXED, WHOLE, NKIND };
static const char *KIND_NAMES[NKIND] = {"scalar", "unit", "strided", "indexed", "whole"};
typedef struct Insn {
    uint64_t vaddr;
    int kind;
    /* on_vector's decoding: the base register, store or load, element bytes x fields (unit-stride), or registers
     * (whole-register); mask: vlm.v / vsm.v (ceil(vl / 8) bytes) */
    uint32_t rs1, store, eew_bytes, fields, whole, mask;
    uint64_t accesses, loaded, stored, l1_miss, l2_miss, l1_wb, l2_wb;
    struct Insn *next;
} Insn;

typedef struct Level {
    uint32_t sets, ways, set_mask;
    uint64_t *tags; /* line number + 1; 0: empty */
    uint64_t *stamps;
    uint8_t *dirty;
    uint64_t clock;
} Level;

static Insn *insns;
static int riscv;
static int caching;
static int per_element; /* per-element=on: every access through on_access (what on_vector is tested against) */
static Level l1, l2;
static uint32_t line_shift, line_bytes;
static uint64_t mru_line = UINT64_MAX; /* the last line touched in L1: a hit that needs no lookup */
static size_t mru_slot;
static int vcpus; /* guest threads seen: more than one, and the model runs under the lock */
static struct qemu_plugin_register *reg_x[32], *reg_vl, *reg_vlenb;
static const char *X_NAMES[32] = {"zero", "ra", "sp", "gp", "tp", "t0", "t1", "t2", "fp", "s1", "a0",
                                  "a1",   "a2", "a3", "a4", "a5", "a6", "a7", "s2", "s3", "s4", "s5",
                                  "s6",   "s7", "s8", "s9", "s10", "s11", "t3", "t4", "t5", "t6"};

static int kind_riscv(const uint8_t *bytes, size_t size)
{
    if (size != 4) {
        return SCALAR;
    }
    uint32_t word;
    memcpy(&word, bytes, 4);
    uint32_t opcode = word & 0x7f, width = (word >> 12) & 7;
    if ((opcode != 0x07 && opcode != 0x27) || !(width == 0 || width >= 5)) {
        return SCALAR;
    }
    uint32_t mop = (word >> 26) & 3, lumop = (word >> 20) & 0x1f;
    if (mop == 0) {
        return lumop == 8 ? WHOLE : UNIT;
    }
    return mop == 2 ? STRIDED : INDEXED;
}

/* Fill the on_vector fields of an unmasked unit-stride or whole-register access; 0 when it needs on_access. */
static int decode_contiguous(Insn *insn, const uint8_t *bytes, size_t size)
{
    if (size != 4 || (insn->kind != UNIT && insn->kind != WHOLE)) {
        return 0;
    }
    uint32_t word;
    memcpy(&word, bytes, 4);
    uint32_t width = (word >> 12) & 7, vm = (word >> 25) & 1, lumop = (word >> 20) & 0x1f;
    if (!vm || lumop == 0x10) { /* masked, or fault-only-first (it may shorten vl): per element */
        return 0;
    }
    insn->rs1 = (word >> 15) & 0x1f;
    insn->store = (word & 0x7f) == 0x27;
    insn->eew_bytes = width == 0 ? 1 : 1u << (width - 4); /* width 0, 5, 6, 7: 8, 16, 32, 64 bits */
    insn->fields = ((word >> 29) & 7) + 1;                /* nf: segment fields, or registers (whole) */
    insn->whole = insn->kind == WHOLE;
    insn->mask = lumop == 0x0b;
    return reg_x[insn->rs1] && reg_vl && reg_vlenb;
}

static int level_init(Level *level, uint32_t sets, uint32_t ways)
{
    if (!sets || !ways || (sets & (sets - 1))) {
        return -1;
    }
    level->sets = sets;
    level->ways = ways;
    level->set_mask = sets - 1;
    level->tags = calloc((size_t)sets * ways, sizeof(uint64_t));
    level->stamps = calloc((size_t)sets * ways, sizeof(uint64_t));
    level->dirty = calloc((size_t)sets * ways, 1);
    return level->tags && level->stamps && level->dirty ? 0 : -1;
}

/* Find ``line`` in its set: its slot, or -1 and the LRU victim's slot in *victim. */
static long lookup(Level *level, uint64_t line, size_t *victim)
{
    size_t base = (size_t)(line & level->set_mask) * level->ways;
    size_t oldest = base;
    for (size_t slot = base; slot < base + level->ways; slot++) {
        if (level->tags[slot] == line + 1) {
            return (long)slot;
        }
        if (level->stamps[slot] < level->stamps[oldest]) {
            oldest = slot;
        }
    }
    *victim = oldest;
    return -1;
}

/* L2 sees a fill (write=0: a read, DRAM on a miss) or a dirty L1 victim (write=1: allocated without a read). */
static void l2_access(uint64_t line, int write, Insn *insn)
{
    size_t victim;
    long slot = lookup(&l2, line, &victim);
    if (slot < 0) {
        if (!write) {
            insn->l2_miss++;
        }
        if (l2.tags[victim] && l2.dirty[victim]) {
            insn->l2_wb++;
        }
        slot = (long)victim;
        l2.tags[slot] = line + 1;
        l2.dirty[slot] = 0;
    }
    l2.stamps[slot] = ++l2.clock;
    l2.dirty[slot] |= (uint8_t)write;
}

static void l1_access(uint64_t line, int store, Insn *insn)
{
    if (line == mru_line) {
        l1.stamps[mru_slot] = ++l1.clock;
        l1.dirty[mru_slot] |= (uint8_t)store;
        return;
    }
    size_t victim;
    long slot = lookup(&l1, line, &victim);
    if (slot < 0) {
        insn->l1_miss++;
        l2_access(line, 0, insn);
        if (l1.tags[victim] && l1.dirty[victim]) {
            insn->l1_wb++;
            l2_access(l1.tags[victim] - 1, 1, insn);
        }
        slot = (long)victim;
        l1.tags[slot] = line + 1;
        l1.dirty[slot] = 0;
    }
    l1.stamps[slot] = ++l1.clock;
    l1.dirty[slot] |= (uint8_t)store;
    mru_line = line;
    mru_slot = (size_t)slot;
}

/* ``accesses`` element accesses of ``size`` bytes in all from ``vaddr`` on, by ``insn``. */
static void account(Insn *insn, uint64_t vaddr, uint64_t size, uint64_t accesses, int store)
{
    int locked = vcpus > 1;
    if (locked) {
        pthread_mutex_lock(&lock);
    }
    insn->accesses += accesses;
    if (store) {
        insn->stored += size;
    } else {
        insn->loaded += size;
    }
    if (caching) {
        uint64_t first = vaddr >> line_shift, last = (vaddr + size - 1) >> line_shift;
        for (uint64_t line = first; line <= last; line++) {
            l1_access(line, store, insn);
        }
    }
    if (locked) {
        pthread_mutex_unlock(&lock);
    }
}

static void on_access(unsigned int vcpu, qemu_plugin_meminfo_t info, uint64_t vaddr, void *udata)
{
    (void)vcpu;
    account(udata, vaddr, 1u << qemu_plugin_mem_size_shift(info), 1, qemu_plugin_mem_is_store(info));
}

static void on_vector(unsigned int vcpu, void *udata)
{
    (void)vcpu;
    Insn *insn = udata;
    uint64_t base = read_reg(reg_x[insn->rs1]), size, accesses;
    if (insn->whole) {
        size = insn->fields * read_reg(reg_vlenb);
        accesses = size / insn->eew_bytes;
    } else {
        uint64_t vl = read_reg(reg_vl);
        accesses = insn->mask ? (vl + 7) / 8 : vl * insn->fields;
        size = accesses * insn->eew_bytes;
    }
    if (size) {
        account(insn, base, size, accesses, (int)insn->store);
    }
}

static void on_vcpu_init(qemu_plugin_id_t id, unsigned int vcpu)
{
    (void)id;
    (void)vcpu;
    __atomic_add_fetch(&vcpus, 1, __ATOMIC_SEQ_CST);
    if (!riscv || reg_vl) {
        return;
    }
    GArray *regs = qemu_plugin_get_registers();
    qemu_plugin_reg_descriptor *d = (qemu_plugin_reg_descriptor *)regs->data;
    for (unsigned int i = 0; i < regs->len; i++) {
        for (int x = 0; x < 32; x++) {
            if (!strcmp(d[i].name, X_NAMES[x])) {
                reg_x[x] = d[i].handle;
            }
        }
        if (!strcmp(d[i].name, "vl")) reg_vl = d[i].handle;
        if (!strcmp(d[i].name, "vlenb")) reg_vlenb = d[i].handle;
    }
    g_array_free(regs, 1);
}

static void on_translate(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
    (void)id;
    Block *b = block_new(tb);
    Insn *made = NULL, *last = NULL;
    for (size_t i = 0; i < b->n_insns; i++) {
        struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
        uint8_t bytes[HEAD];
        size_t size = block_take(b, insn, bytes);
        Insn *record = calloc(1, sizeof(*record));
        record->vaddr = qemu_plugin_insn_vaddr(insn);
        record->kind = riscv ? kind_riscv(bytes, size) : SCALAR;
        if (riscv && !per_element && decode_contiguous(record, bytes, size)) {
            qemu_plugin_register_vcpu_insn_exec_cb(insn, on_vector, QEMU_PLUGIN_CB_R_REGS, record);
        } else { /* called only when the instruction accesses memory: other records stay at zero, not written */
            qemu_plugin_register_vcpu_mem_cb(insn, on_access, QEMU_PLUGIN_CB_NO_REGS, QEMU_PLUGIN_MEM_RW, record);
        }
        if (last) {
            last->next = record;
        } else {
            made = record;
        }
        last = record;
    }
    block_keep(b, tb);
    pthread_mutex_lock(&lock);
    if (last) {
        last->next = insns;
        insns = made;
    }
    pthread_mutex_unlock(&lock);
}

static void write_trace(qemu_plugin_id_t id, void *udata)
{
    (void)id;
    (void)udata;
    FILE *f = open_out("rvv_memtrace");
    if (!f) {
        return;
    }
    fprintf(f, "rvv-memtrace 1 %s\n", target);
    if (caching) {
        fprintf(f, "cache %u %u %u %u %u\n", l1.sets, l1.ways, l2.sets, l2.ways, line_bytes);
    }
    for (Block *b = blocks; b; b = b->next) {
        block_write(f, b);
    }
    for (Insn *r = insns; r; r = r->next) {
        if (r->accesses) {
            fprintf(f, "mi %" PRIx64 " %s %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64
                    " %" PRIu64 "\n", r->vaddr, KIND_NAMES[r->kind], r->accesses, r->loaded, r->stored, r->l1_miss,
                    r->l2_miss, r->l1_wb, r->l2_wb);
        }
    }
    fclose(f);
}

PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc, char **argv)
{
    for (int i = 0; i < argc; i++) {
        unsigned l1_sets, l1_ways, l2_sets, l2_ways, line;
        if (!strncmp(argv[i], "out=", 4)) {
            out_path = argv[i] + 4;
        } else if (sscanf(argv[i], "cache=%u:%u:%u:%u:%u", &l1_sets, &l1_ways, &l2_sets, &l2_ways, &line) == 5) {
            if (!line || (line & (line - 1)) || level_init(&l1, l1_sets, l1_ways) ||
                level_init(&l2, l2_sets, l2_ways)) {
                fprintf(stderr, "rvv_memtrace: %s: sets and line must be powers of two, ways > 0\n", argv[i]);
                return -1;
            }
            line_bytes = line;
            line_shift = (uint32_t)__builtin_ctz(line);
            caching = 1;
        } else if (!strcmp(argv[i], "per-element=on")) {
            per_element = 1;
        } else {
            fprintf(stderr, "rvv_memtrace: unknown argument %s (use out=FILE, cache=L1SETS:L1WAYS:L2SETS:L2WAYS:LINE, "
                    "per-element=on)\n", argv[i]);
            return -1;
        }
    }
    if (!out_path) {
        fprintf(stderr, "rvv_memtrace: out=FILE is required\n");
        return -1;
    }
    snprintf(target, sizeof(target), "%s", info->target_name);
    riscv = !strncmp(target, "riscv", 5);
    qemu_plugin_register_vcpu_init_cb(id, on_vcpu_init);
    qemu_plugin_register_vcpu_tb_trans_cb(id, on_translate);
    qemu_plugin_register_atexit_cb(id, write_trace, NULL);
    return 0;
}
