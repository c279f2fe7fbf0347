/* tern inspect --model DIR|FILE.gguf: what tern_model_inspect prints. */
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/device_opt.h"
#include "tern/model.h"

int tern_cmd_inspect(int argc, char **argv)
{
    const char *path = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--model") && i + 1 < argc) path = argv[++i];
        else { fprintf(stderr, "usage: tern inspect --model DIR\n"); return 2; }
    }
    if (!path) { fprintf(stderr, "usage: tern inspect --model DIR\n"); return 2; }
    if (tern_model_inspect(path, cli_device_name(), stdout)) {
        fprintf(stderr, "tern: %s\n", tern_last_error());
        return 1;
    }
    return 0;
}
