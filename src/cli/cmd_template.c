/* tern template: renders a model's chat template for a conversation and prints
 * exactly the rendered prompt. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli_util.h"
#include "tern/model.h"
#include "tern/chat_template.h"
#include "tern/system.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: tern template --model DIR --messages FILE.json [--tools FILE.json]\n"
               "                     [--no-generation-prompt] [--kwargs JSON]\n"
               "Renders DIR's chat template (chat_template.jinja or tokenizer_config.json) with the\n"
               "messages of FILE.json (a JSON array; - reads stdin) and prints the prompt. --kwargs passes extra\n"
               "template variables as a JSON object, e.g. '{\"enable_thinking\": false}'.\n");
}

static char *slurp(const char *path)
{
    FILE *f = strcmp(path, "-") ? fopen(path, "rb") : stdin;
    if (!f)
        return NULL;
    char *buf = tern_read_all(f);
    if (f != stdin)
        fclose(f);
    return buf;
}

int tern_cmd_template(int argc, char **argv)
{
    const char *model = NULL, *messages = NULL, *tools = NULL, *kwargs = NULL;
    int add_generation_prompt = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--no-generation-prompt")) {
            add_generation_prompt = 0;
        } else if (i + 1 < argc && !strcmp(a, "--model")) {
            model = argv[++i];
        } else if (i + 1 < argc && !strcmp(a, "--messages")) {
            messages = argv[++i];
        } else if (i + 1 < argc && !strcmp(a, "--tools")) {
            tools = argv[++i];
        } else if (i + 1 < argc && !strcmp(a, "--kwargs")) {
            kwargs = argv[++i];
        } else {
            fprintf(stderr, "tern template: unknown or incomplete option '%s'\n", a);
            usage(stderr);
            return 2;
        }
    }
    if (!model || !messages) {
        usage(stderr);
        return 2;
    }
    char *msg_text = slurp(messages), *tools_text = NULL;
    if (!msg_text) {
        fprintf(stderr, "tern template: cannot read %s\n", messages);
        return 1;
    }
    if (tools && !(tools_text = slurp(tools))) {
        fprintf(stderr, "tern template: cannot read %s\n", tools);
        free(msg_text);
        return 1;
    }
    tern_chat_template *t = NULL;
    char *out = NULL;
    char tdir[4096];
    int ttemp = 0;
    tern_status st = tern_model_text_dir_open(model, tdir, sizeof tdir, &ttemp);
    if (!st) st = tern_chat_template_load(tdir, &t);
    tern_model_text_dir_close(tdir, ttemp);
    if (st == TERN_OK)
        st = tern_chat_template_render(t, msg_text, tools_text, add_generation_prompt, kwargs, &out);
    if (st != TERN_OK)
        fprintf(stderr, "tern template: %s\n", tern_last_error());
    else
        fwrite(out, 1, strlen(out), stdout);
    free(out);
    tern_chat_template_free(t);
    free(msg_text);
    free(tools_text);
    return st == TERN_OK ? 0 : 1;
}
