/* A kernel timeline of any CUDA program, through CUPTI's activity records:
 * built as a shared library and named by CUDA_INJECTION64_PATH, it is
 * loaded by the CUDA driver, records every kernel's start and end (graph
 * replays included, overlapping launches as they ran) and writes them at
 * exit to $TERN_KTRACE (default ktrace.tsv), one kernel a line:
 *   start_ns  end_ns  graph_id  graph_node_id  grid_x grid_y grid_z  name
 * bench/ktrace/ktrace_summary.py reads it. Build (bench/cuda/device_run.sh's
 * ktrace phase carries it built):
 *   cc -O2 -shared -fPIC -I$CUDA/include bench/ktrace/ktrace.c -L$CUDA/lib -lcupti -o libktrace.so */
#include <cupti.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { BUF_BYTES = 8 << 20, ALIGN = 8 };

static FILE *out;

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
    uint8_t *b = malloc(BUF_BYTES + ALIGN);
    *buffer = b ? b + (ALIGN - ((uintptr_t)b & (ALIGN - 1))) % ALIGN : NULL;
    *size = b ? BUF_BYTES : 0;
    *max_records = 0;
}

/* The buffer's start as malloc returned it is not kept: the few buffers
 * of a run are left to the exit (their offset is at most ALIGN - 1). */
static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size, size_t valid)
{
    (void)ctx, (void)stream, (void)size;
    CUpti_Activity *rec = NULL;
    while (cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) {
        if (rec->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL && rec->kind != CUPTI_ACTIVITY_KIND_KERNEL) continue;
        const CUpti_ActivityKernel10 *k = (const CUpti_ActivityKernel10 *)rec;
        if (out)
            fprintf(out, "%llu\t%llu\t%u\t%llu\t%d\t%d\t%d\t%s\n", (unsigned long long)k->start,
                    (unsigned long long)k->end, k->graphId, (unsigned long long)k->graphNodeId, k->gridX, k->gridY,
                    k->gridZ, k->name ? k->name : "?");
    }
}

static void finish(void)
{
    cuptiActivityFlushAll(1);
    if (out) fclose(out);
    out = NULL;
}

int InitializeInjection(void)
{
    const char *path = getenv("TERN_KTRACE");
    out = fopen(path && *path ? path : "ktrace.tsv", "w");
    if (!out) return 0;
    if (cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed) != CUPTI_SUCCESS ||
        cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) != CUPTI_SUCCESS) {
        fprintf(stderr, "ktrace: CUPTI activity setup failed\n");
        return 0;
    }
    atexit(finish);
    return 1;
}
