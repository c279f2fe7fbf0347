#include "cli/device_opt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda.h"

static cli_device_kind chosen = CLI_DEVICE_CPU;
static char chosen_name[256] = "cpu";

static int parse(const char *v, cli_device_kind *kind, int *index)
{
    *index = 0;
    if (!strcmp(v, "cpu")) {
        *kind = CLI_DEVICE_CPU;
        return 0;
    }
    if (!strncmp(v, "cuda", 4) && (v[4] == '\0' || v[4] == ':')) {
        *kind = CLI_DEVICE_CUDA;
        if (v[4] == ':') {
            char *end;
            long n = strtol(v + 5, &end, 10);
            if (end == v + 5 || *end || n < 0 || n > 64) return -1;
            *index = (int)n;
        }
        return 0;
    }
    return -1;
}

/* Opens the device once to prove it usable and names it; the model the
 * command loads then runs there (TERN_DEVICE, read by tern_model_load). */
static int check_cuda(int index)
{
    tern_cuda *c = NULL;
    if (tern_cuda_open(index, &c) != TERN_OK) {
        fprintf(stderr, "tern: --device cuda:%d: %s\n", index, tern_last_error());
        return 1;
    }
    snprintf(chosen_name, sizeof chosen_name, "cuda:%d %s", index, tern_cuda_describe(c));
    tern_cuda_close(c);
    char v[32];
    snprintf(v, sizeof v, "cuda:%d", index);
    setenv("TERN_DEVICE", v, 1);
    return 0;
}

int cli_take_device(int *argc, char **argv)
{
    const char *v = getenv("TERN_DEVICE");
    int out = 1;
    for (int i = 1; i < *argc; i++) {
        if (!strcmp(argv[i], "--device")) {
            if (i + 1 >= *argc) {
                fprintf(stderr, "tern: option --device needs a value (cpu or cuda[:N])\n");
                return 2;
            }
            v = argv[++i];
        } else if (!strncmp(argv[i], "--device=", 9)) {
            v = argv[i] + 9;
        } else {
            argv[out++] = argv[i];
        }
    }
    *argc = out;
    argv[out] = NULL;
    if (!v) return 0;
    int index;
    if (parse(v, &chosen, &index)) {
        fprintf(stderr, "tern: --device must be cpu or cuda[:N], not '%s'\n", v);
        return 2;
    }
    if (chosen == CLI_DEVICE_CUDA) return check_cuda(index);
    setenv("TERN_DEVICE", "cpu", 1);
    return 0;
}

cli_device_kind cli_device(void) { return chosen; }

const char *cli_device_name(void) { return chosen_name; }
