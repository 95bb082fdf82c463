/*
 * pytest-rvv's own declarations of the QEMU TCG plugin API's memory callbacks (API version 3, QEMU >= 9.1),
 * written from the API's documentation: what rvv_memtrace.c uses beyond qemu_plugin_api.h (kept apart so the
 * counting plugin's sources, and with them its recorded runs, stay as they are). No QEMU code is copied here.
 */
#ifndef PYTEST_RVV_QEMU_PLUGIN_MEM_API_H
#define PYTEST_RVV_QEMU_PLUGIN_MEM_API_H

#include "qemu_plugin_api.h"

enum qemu_plugin_mem_rw { QEMU_PLUGIN_MEM_R = 1, QEMU_PLUGIN_MEM_W, QEMU_PLUGIN_MEM_RW };

typedef uint32_t qemu_plugin_meminfo_t;
typedef void (*qemu_plugin_vcpu_mem_cb_t)(unsigned int vcpu_index, qemu_plugin_meminfo_t info, uint64_t vaddr,
                                          void *userdata);

void qemu_plugin_register_vcpu_mem_cb(struct qemu_plugin_insn *insn, qemu_plugin_vcpu_mem_cb_t cb,
                                      enum qemu_plugin_cb_flags flags, enum qemu_plugin_mem_rw rw, void *userdata);
unsigned int qemu_plugin_mem_size_shift(qemu_plugin_meminfo_t info);
bool qemu_plugin_mem_is_store(qemu_plugin_meminfo_t info);

#endif
