/*
 * rvv_counter: a QEMU TCG plugin counting executed instructions per translation block.
 *
 * Cheap by construction: every TB gets one inline per-vCPU scoreboard add per execution (no
 * callback); its instructions are classified once, at translation (RISC-V: RVV arithmetic / memory /
 * vset*). In user mode every guest thread is its own vCPU (QEMU gives each new thread the next free
 * cpu_index), so a multi-threaded runtime's work splits by thread from the same counts (tv lines).
 * With elements=on, vector instructions additionally get a callback reading the vl and vtype CSRs,
 * to sum the elements processed and VLMAX (lane occupancy) per instruction address.
 *
 * Arguments: out=FILE (required), elements=on|off (default off).
 * Output (text, at exit):
 *   rvv-counter 1 <target_name>
 *   vcpus <n>                                    (QEMU's highest vCPU index + 1: a thread started after one
 *                                                 exited may reuse its index)
 *   vlen <bits>                                  (elements=on, riscv64 with V)
 *   tb <vaddr> <n_insns> <execs> <varith> <vmem> <vset> <first bytes hex>
 *   tv <vaddr> <vcpu> <execs>                    (the tb line's block, per vCPU that ran it;
 *                                                 none when only vCPU 0 did)
 *   el <class> <executions> <sum vl> <sum vlmax>  (elements=on; class: varith|vmem)
 *   ei <vaddr> <class> <executions> <sum vl> <sum vlmax>  (elements=on; one per translated vector instruction)
 * Python (pytest_rvv.measure.counts) aggregates and attributes the blocks to dispatches; pytest_rvv.measure.threads
 * thread by thread.
 */
#include "qemu_plugin_api.h"
#include "rvv_blocks.h"

PLUGIN_EXPORT int qemu_plugin_version = 3;

enum { VARITH, VMEM, VSET }; /* the block's classes[] */

typedef struct {
    uint64_t executions;
    uint64_t sum_vl;
    uint64_t sum_vlmax;
} Elements;

/* One translated vector instruction: where, which class, and its element sums per vCPU. */
typedef struct Insn {
    uint64_t vaddr;
    uint32_t cls; /* 0: varith, 1: vmem */
    struct qemu_plugin_scoreboard *sums;
    struct Insn *next;
} Insn;

static int riscv;
static int count_elements;
static Insn *insns;
static struct qemu_plugin_register *reg_vl, *reg_vtype, *reg_vlenb;
static uint64_t vlen_bits;

static int classify_riscv(uint32_t word, size_t size)
{
    if (size != 4) {
        return -1; /* compressed: scalar */
    }
    uint32_t opcode = word & 0x7f, funct3 = (word >> 12) & 7;
    if (opcode == 0x57) {
        return funct3 == 7 ? VSET : VARITH;
    }
    if ((opcode == 0x07 || opcode == 0x27) && (funct3 == 0 || funct3 >= 5)) {
        return VMEM;
    }
    return -1;
}

static void on_vector_insn(unsigned int vcpu, void *udata)
{
    const Insn *insn = udata;
    uint64_t vl = read_reg(reg_vl), vtype = read_reg(reg_vtype);
    uint64_t sew = 8u << ((vtype >> 3) & 7), lmul = vtype & 7;
    uint64_t vlmax = lmul < 4 ? (vlen_bits << lmul) / sew : (vlen_bits >> (8 - lmul)) / sew;
    Elements *e = qemu_plugin_scoreboard_find(insn->sums, vcpu);
    e->executions += 1;
    e->sum_vl += vl;
    e->sum_vlmax += vlmax;
}

static void on_vcpu_init(qemu_plugin_id_t id, unsigned int vcpu)
{
    (void)id;
    (void)vcpu;
    GArray *regs = qemu_plugin_get_registers();
    qemu_plugin_reg_descriptor *d = (qemu_plugin_reg_descriptor *)regs->data;
    for (unsigned int i = 0; i < regs->len; i++) {
        if (!strcmp(d[i].name, "vl")) reg_vl = d[i].handle;
        if (!strcmp(d[i].name, "vtype")) reg_vtype = d[i].handle;
        if (!strcmp(d[i].name, "vlenb")) reg_vlenb = d[i].handle;
    }
    g_array_free(regs, 1);
    if (reg_vlenb && !vlen_bits) {
        vlen_bits = read_reg(reg_vlenb) * 8;
    }
}

static void on_translate(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
    Block *b = block_new(tb);
    for (size_t i = 0; i < b->n_insns; i++) {
        struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
        uint8_t bytes[HEAD];
        size_t size = block_take(b, insn, bytes);
        if (!riscv) {
            continue;
        }
        uint32_t word = 0;
        memcpy(&word, bytes, size < 4 ? size : 4);
        int cls = classify_riscv(word, size);
        if (cls < 0) {
            continue;
        }
        b->classes[cls]++;
        if (count_elements && cls != VSET && reg_vl && reg_vtype && vlen_bits) {
            Insn *record = calloc(1, sizeof(*record));
            record->vaddr = qemu_plugin_insn_vaddr(insn);
            record->cls = cls == VMEM ? 1 : 0;
            record->sums = qemu_plugin_scoreboard_new(sizeof(Elements));
            qemu_plugin_register_vcpu_insn_exec_cb(insn, on_vector_insn, QEMU_PLUGIN_CB_R_REGS, record);
            pthread_mutex_lock(&lock);
            record->next = insns;
            insns = record;
            pthread_mutex_unlock(&lock);
        }
    }
    block_keep(b, tb);
}

static void write_counts(qemu_plugin_id_t id, void *udata)
{
    FILE *f = open_out("rvv_counter");
    if (!f) {
        return;
    }
    int vcpus = qemu_plugin_num_vcpus();
    fprintf(f, "rvv-counter 1 %s\nvcpus %d\n", target, vcpus);
    if (count_elements) {
        fprintf(f, "vlen %" PRIu64 "\n", vlen_bits);
    }
    for (Block *b = blocks; b; b = b->next) {
        block_write(f, b);
        block_write_vcpus(f, b, vcpus);
    }
    if (count_elements) {
        Elements total[2] = {{0}};
        for (Insn *r = insns; r; r = r->next) {
            Elements sum = {0};
            for (int cpu = 0; cpu < vcpus; cpu++) { /* user mode: threads are vCPUs */
                Elements *e = qemu_plugin_scoreboard_find(r->sums, cpu);
                sum.executions += e->executions;
                sum.sum_vl += e->sum_vl;
                sum.sum_vlmax += e->sum_vlmax;
            }
            total[r->cls].executions += sum.executions;
            total[r->cls].sum_vl += sum.sum_vl;
            total[r->cls].sum_vlmax += sum.sum_vlmax;
            if (sum.executions) {
                fprintf(f, "ei %" PRIx64 " %s %" PRIu64 " %" PRIu64 " %" PRIu64 "\n", r->vaddr,
                        r->cls ? "vmem" : "varith", sum.executions, sum.sum_vl, sum.sum_vlmax);
            }
        }
        const char *names[2] = {"varith", "vmem"};
        for (int c = 0; c < 2; c++) {
            fprintf(f, "el %s %" PRIu64 " %" PRIu64 " %" PRIu64 "\n", names[c], total[c].executions,
                    total[c].sum_vl, total[c].sum_vlmax);
        }
    }
    fclose(f);
}

PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc, char **argv)
{
    for (int i = 0; i < argc; i++) {
        if (!strncmp(argv[i], "out=", 4)) {
            out_path = argv[i] + 4;
        } else if (!strcmp(argv[i], "elements=on")) {
            count_elements = 1;
        } else if (strcmp(argv[i], "elements=off")) {
            fprintf(stderr, "rvv_counter: unknown argument %s (use out=FILE, elements=on|off)\n", argv[i]);
            return -1;
        }
    }
    if (!out_path) {
        fprintf(stderr, "rvv_counter: out=FILE is required\n");
        return -1;
    }
    snprintf(target, sizeof(target), "%s", info->target_name);
    riscv = !strncmp(target, "riscv", 5);
    if (count_elements) {
        qemu_plugin_register_vcpu_init_cb(id, on_vcpu_init);
    }
    qemu_plugin_register_vcpu_tb_trans_cb(id, on_translate);
    qemu_plugin_register_atexit_cb(id, write_counts, NULL);
    return 0;
}
