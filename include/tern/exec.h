/* An execution context: what a forward pass runs on and with — the compute
 * threads, the scratch workspace activations live in between the ops, and
 * the lock that lets one pass at a time use them.
 *
 * Every model runs on one. A model loaded without one makes its own; models
 * loaded with the same context (a target and its draft model) share the
 * threads and the workspace and take turns under its lock, so two models cost
 * one set of threads and one workspace sized for the larger pass.
 *
 * tern_exec_create returns an owned context; tern_exec_free releases it and
 * must come after every model that borrows it is freed. */
#ifndef TERN_EXEC_H
#define TERN_EXEC_H

#include "tern/status.h"

typedef struct tern_exec tern_exec;

/* n_threads counts the calling thread; 0 = all online cores. */
tern_status tern_exec_create(int n_threads, tern_exec **out);
void tern_exec_free(tern_exec *x);
int tern_exec_threads(const tern_exec *x);
/* A context whose passes run on device: "cpu" (or NULL) is
 * tern_exec_create; "cuda" or "cuda:N" also opens that GPU, and fails with
 * TERN_E_UNSUPPORTED naming what is missing (no CUDA in this build, no
 * usable device, a device older than sm_90). device borrowed. */
tern_status tern_exec_create_device(int n_threads, const char *device, tern_exec **out);
/* "cpu" or "cuda" (static string). */
const char *tern_exec_device_name(const tern_exec *x);

#endif
