/*
 * Read-only memory bandwidth probe: the ceiling a weight-streaming decode can reach.
 *
 *   sum ^= a[i]   over one uint64 array far larger than the last-level cache,
 *
 * split evenly across N threads (each first-touches its own slice), eight independent
 * accumulators per thread so the loop is bound by memory, not by the reduction; repeated R
 * times, the best repetition is reported. Bytes counted: the array, once per pass. A STREAM
 * triad (bench/stream_triad_main.c) counts two reads and a write and understates this.
 *
 * Usage: stream_read [--threads N] [--mib M] [--reps R] [--json]
 * Build: cc -O3 -march=native -o stream_read bench/stream_read_main.c -lpthread
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
    uint64_t *a;
    size_t lo, hi;
    pthread_barrier_t *bar;
    int reps;
    double *best;
    uint64_t sink;
} job;

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static void *run(void *vp)
{
    job *j = vp;
    for (size_t i = j->lo; i < j->hi; i++) j->a[i] = i * 0x9e3779b97f4a7c15ull;
    for (int r = 0; r < j->reps; r++) {
        pthread_barrier_wait(j->bar);
        double t0 = now();
        uint64_t s[8] = {0};
        for (size_t i = j->lo; i + 8 <= j->hi; i += 8)
            for (int k = 0; k < 8; k++) s[k] ^= j->a[i + k];
        for (int k = 0; k < 8; k++) j->sink ^= s[k];
        pthread_barrier_wait(j->bar);
        double dt = now() - t0;
        if (j->lo == 0 && (j->best[0] == 0 || dt < j->best[0])) j->best[0] = dt;
    }
    return NULL;
}

int main(int argc, char **argv)
{
    int threads = 2, reps = 10, json = 0;
    size_t mib = 512;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--mib") && i + 1 < argc) mib = (size_t)atol(argv[++i]);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--json")) json = 1;
        else { fprintf(stderr, "usage: stream_read [--threads N] [--mib M] [--reps R] [--json]\n"); return 2; }
    }
    if (threads < 1 || threads > 256 || reps < 1 || mib < 1) return 2;
    size_t n = mib << 17;   /* uint64 elements */
    uint64_t *a = aligned_alloc(64, n * 8);
    if (!a) { fprintf(stderr, "stream_read: no memory\n"); return 1; }
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, (unsigned)threads);
    job *js = calloc((size_t)threads, sizeof *js);
    pthread_t *ts = calloc((size_t)threads, sizeof *ts);
    double best = 0;
    for (int t = 0; t < threads; t++) {
        js[t] = (job){a, n * t / threads / 8 * 8, n * (t + 1) / threads / 8 * 8, &bar, reps, &best, 0};
        pthread_create(&ts[t], NULL, run, &js[t]);
    }
    uint64_t sink = 0;
    for (int t = 0; t < threads; t++) {
        pthread_join(ts[t], NULL);
        sink ^= js[t].sink;
    }
    double gbps = (double)(n * 8) / best / 1e9;
    printf("read-only stream: %.1f GB/s (%d threads, %zu MiB, best of %d)%s\n", gbps, threads, mib, reps,
           sink == 1 ? " " : "");
    if (json) printf("{\"read_gbps\": %.3f, \"threads\": %d, \"mib\": %zu}\n", gbps, threads, mib);
    free(js);
    free(ts);
    free(a);
    return 0;
}
