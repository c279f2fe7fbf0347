/* tern: command-line entry point; dispatches to one cmd_*.c per command. */
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/device_opt.h"

/* Declared here so that adding a command is one line in each list below. */
int tern_cmd_version(int argc, char **argv);
int tern_cmd_tokenize(int argc, char **argv);
int tern_cmd_detokenize(int argc, char **argv);
int tern_cmd_logits(int argc, char **argv);
int tern_cmd_generate(int argc, char **argv);
int tern_cmd_bench(int argc, char **argv);
int tern_cmd_inspect(int argc, char **argv);
int tern_cmd_serve(int argc, char **argv);
int tern_cmd_template(int argc, char **argv);
int tern_cmd_chat(int argc, char **argv);

const tern_cli_command tern_cli_commands[] = {
    {"version", tern_cmd_version, "print the version"},
    {"tokenize", tern_cmd_tokenize, "text to token ids with tokenizer.json"},
    {"detokenize", tern_cmd_detokenize, "token ids to text with tokenizer.json"},
    {"logits", tern_cmd_logits, "write the logits of a token sequence"},
    {"generate", tern_cmd_generate, "generate text from a prompt"},
    {"bench", tern_cmd_bench, "measure prefill and decode speed"},
    {"inspect", tern_cmd_inspect, "describe a model directory"},
    {"chat", tern_cmd_chat, "chat with a model in the terminal"},
    {"serve", tern_cmd_serve, "serve the OpenAI and Anthropic HTTP APIs"},
    {"template", tern_cmd_template, "render a chat template for a conversation"},
    {NULL, NULL, NULL},
};

/* Commands that load a model and so take --device (device_opt.h). */
static int runs_model(const char *name)
{
    static const char *const names[] = {"logits", "generate", "bench", "inspect", "serve", "chat", NULL};
    for (int i = 0; names[i]; i++)
        if (!strcmp(name, names[i])) return 1;
    return 0;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: tern <command> [options]\n\ncommands:\n");
    for (const tern_cli_command *c = tern_cli_commands; c->name; c++)
        fprintf(f, "  %-12s %s\n", c->name, c->summary);
    fprintf(f, "\n`tern <command> --help` describes a command's options.\n");
    fprintf(f, "logits, generate, bench, inspect, serve and chat also take --device cpu|cuda[:N] (TERN_DEVICE).\n");
}

int main(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    for (const tern_cli_command *c = tern_cli_commands; c->name; c++)
        if (!strcmp(argv[1], c->name)) {
            if (runs_model(c->name)) {
                int rc = cli_take_device(&argc, argv);
                if (rc) return rc;
            }
            return c->run(argc - 1, argv + 1);
        }
    fprintf(stderr, "tern: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
