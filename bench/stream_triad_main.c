/*
 * Standalone STREAM-triad memory bandwidth probe for the CPU benchmark.
 *
 *   a[i] = b[i] + s * c[i]   over three double arrays far larger than the last-level cache,
 *
 * split evenly across N threads (each thread first-touches its own slice), repeated R times;
 * the best repetition is reported. Bytes counted per element are 24 (read b, read c, write a),
 * the STREAM convention (write-allocate traffic is not counted).
 *
 * Usage: stream_triad [--threads N] [--mib M] [--reps R] [--json]
 *   --threads  worker threads (default 2)
 *   --mib      size of each array in MiB (default 256)
 *   --reps     repetitions, best is kept (default 10)
 *   --json     print one JSON line {"triad_gbps": ..., "threads": ..., ...} last
 *
 * Build: cc -O3 -march=native -o stream_triad bench/stream_triad_main.c -lpthread
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
    double *a;             /* borrowed: shared arrays */
    double *b;
    double *c;
    size_t begin;
    size_t end;
    int reps;
    pthread_barrier_t *barrier; /* borrowed */
} triad_worker;

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void triad_slice(double *restrict a, const double *restrict b, const double *restrict c,
                        size_t begin, size_t end, double s) {
    for (size_t i = begin; i < end; i++) {
        a[i] = b[i] + s * c[i];
    }
}

static void *triad_worker_run(void *arg) {
    triad_worker *w = arg;
    /* First touch: each thread initializes the pages it will stream. */
    for (size_t i = w->begin; i < w->end; i++) {
        w->a[i] = 0.0;
        w->b[i] = 1.0;
        w->c[i] = 2.0;
    }
    pthread_barrier_wait(w->barrier);
    for (int r = 0; r < w->reps; r++) {
        pthread_barrier_wait(w->barrier); /* start of repetition r */
        triad_slice(w->a, w->b, w->c, w->begin, w->end, 3.0);
        pthread_barrier_wait(w->barrier); /* end of repetition r */
    }
    return NULL;
}

static int parse_int(const char *text, int lo, int hi, int *out) {
    char *end = NULL;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (errno != 0 || end == text || *end != '\0' || v < lo || v > hi) {
        return -1;
    }
    *out = (int)v;
    return 0;
}

static void usage(void) {
    fprintf(stderr, "usage: stream_triad [--threads N] [--mib M] [--reps R] [--json]\n");
}

int main(int argc, char **argv) {
    int threads = 2;
    int mib = 256;
    int reps = 10;
    int json = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0) {
            json = 1;
        } else if (i + 1 < argc && strcmp(argv[i], "--threads") == 0) {
            if (parse_int(argv[++i], 1, 1024, &threads) != 0) { usage(); return 2; }
        } else if (i + 1 < argc && strcmp(argv[i], "--mib") == 0) {
            if (parse_int(argv[++i], 1, 65536, &mib) != 0) { usage(); return 2; }
        } else if (i + 1 < argc && strcmp(argv[i], "--reps") == 0) {
            if (parse_int(argv[++i], 1, 100000, &reps) != 0) { usage(); return 2; }
        } else {
            usage();
            return 2;
        }
    }

    size_t n = (size_t)mib * 1024u * 1024u / sizeof(double);
    double *a = NULL, *b = NULL, *c = NULL;
    if (posix_memalign((void **)&a, 4096, n * sizeof(double)) != 0 ||
        posix_memalign((void **)&b, 4096, n * sizeof(double)) != 0 ||
        posix_memalign((void **)&c, 4096, n * sizeof(double)) != 0) {
        fprintf(stderr, "stream_triad: cannot allocate 3 x %d MiB\n", mib);
        free(a);
        free(b);
        free(c);
        return 1;
    }

    pthread_barrier_t barrier;
    pthread_barrier_init(&barrier, NULL, (unsigned)threads + 1u);
    triad_worker *workers = calloc((size_t)threads, sizeof(*workers));
    pthread_t *tids = calloc((size_t)threads, sizeof(*tids));
    if (workers == NULL || tids == NULL) {
        fprintf(stderr, "stream_triad: out of memory\n");
        return 1;
    }
    for (int t = 0; t < threads; t++) {
        workers[t] = (triad_worker){a, b, c, n * (size_t)t / (size_t)threads,
                                    n * (size_t)(t + 1) / (size_t)threads, reps, &barrier};
        if (pthread_create(&tids[t], NULL, triad_worker_run, &workers[t]) != 0) {
            fprintf(stderr, "stream_triad: cannot start thread %d\n", t);
            return 1;
        }
    }

    pthread_barrier_wait(&barrier); /* initialization done */
    double best = 1e30, total = 0.0;
    for (int r = 0; r < reps; r++) {
        double t0 = now_seconds();
        pthread_barrier_wait(&barrier);
        pthread_barrier_wait(&barrier);
        double dt = now_seconds() - t0;
        total += dt;
        if (dt < best) {
            best = dt;
        }
    }
    for (int t = 0; t < threads; t++) {
        pthread_join(tids[t], NULL);
    }
    pthread_barrier_destroy(&barrier);

    /* Checksum so the compiler cannot drop the work: a[i] == 1 + 3 * 2 == 7. */
    int ok = a[0] == 7.0 && a[n / 2] == 7.0 && a[n - 1] == 7.0;
    double bytes = 3.0 * (double)sizeof(double) * (double)n;
    double best_gbps = bytes / best / 1e9;
    double avg_gbps = bytes / (total / reps) / 1e9;
    printf("STREAM triad: %d threads, 3 x %d MiB arrays, %d reps: best %.2f GB/s, avg %.2f GB/s%s\n",
           threads, mib, reps, best_gbps, avg_gbps, ok ? "" : " (CHECK FAILED)");
    if (json) {
        printf("{\"triad_gbps\": %.3f, \"triad_avg_gbps\": %.3f, \"threads\": %d, \"array_mib\": %d, "
               "\"reps\": %d}\n",
               best_gbps, avg_gbps, threads, mib, reps);
    }
    free(workers);
    free(tids);
    free(a);
    free(b);
    free(c);
    return ok ? 0 : 1;
}
