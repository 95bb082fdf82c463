/*
 * rvv_threads: a QEMU TCG plugin counting executed translation blocks per vCPU.
 *
 * In user mode every guest thread is its own vCPU (QEMU gives each new thread the next free cpu_index), so a
 * multi-threaded runtime's work splits by thread: each TB gets one inline per-vCPU scoreboard add per execution (no
 * callback, as rvv_counter does for its total). A separate plugin from rvv_counter.c, so the counter's build, and
 * with it every recorded counted run, stays as it is.
 *
 * Arguments: out=FILE (required).
 * Output (text, at exit):
 *   rvv-threads 1 <target_name>
 *   vcpus <n>
 *   tb <vaddr> <n_insns> <execs over all vCPUs> 0 0 0 <first bytes hex>   (rvv_counter's tb line, no classes)
 *   tv <vaddr> <vcpu> <execs>                                            (one per vCPU that ran the block)
 * Python (pytest_rvv.measure.threads) attributes the blocks to dispatches, thread by thread.
 */
#include "qemu_plugin_api.h"
#include "rvv_blocks.h"

PLUGIN_EXPORT int qemu_plugin_version = 3;

static void on_translate(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
    (void)id;
    Block *b = block_new(tb);
    uint8_t bytes[HEAD];
    for (size_t i = 0; i < b->n_insns && !b->head_full; i++) {
        block_take(b, qemu_plugin_tb_get_insn(tb, i), bytes);
    }
    block_keep(b, tb);
}

static void write_counts(qemu_plugin_id_t id, void *udata)
{
    (void)id;
    (void)udata;
    FILE *f = open_out("rvv_threads");
    if (!f) {
        return;
    }
    int vcpus = qemu_plugin_num_vcpus();
    fprintf(f, "rvv-threads 1 %s\nvcpus %d\n", target, vcpus);
    for (Block *b = blocks; b; b = b->next) {
        block_write(f, b);
        for (int cpu = 0; cpu < vcpus; cpu++) {
            uint64_t *execs = qemu_plugin_scoreboard_find(b->execs, cpu);
            if (*execs) {
                fprintf(f, "tv %" PRIx64 " %d %" PRIu64 "\n", b->vaddr, cpu, *execs);
            }
        }
    }
    fclose(f);
}

PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc, char **argv)
{
    for (int i = 0; i < argc; i++) {
        if (!strncmp(argv[i], "out=", 4)) {
            out_path = argv[i] + 4;
        } else {
            fprintf(stderr, "rvv_threads: unknown argument %s (use out=FILE)\n", argv[i]);
            return -1;
        }
    }
    if (!out_path) {
        fprintf(stderr, "rvv_threads: out=FILE is required\n");
        return -1;
    }
    snprintf(target, sizeof(target), "%s", info->target_name);
    qemu_plugin_register_vcpu_tb_trans_cb(id, on_translate);
    qemu_plugin_register_atexit_cb(id, write_counts, NULL);
    return 0;
}
