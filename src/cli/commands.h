/* One function per `tern <command>`; each lives in its own cmd_*.c file and
 * returns the process exit status (0 ok, 1 runtime failure, 2 usage error). */
#ifndef TERN_CLI_COMMANDS_H
#define TERN_CLI_COMMANDS_H

typedef struct {
    const char *name;
    int (*run)(int argc, char **argv);   /* argv[0] is the command name */
    const char *summary;
} tern_cli_command;

/* The table, terminated by a {NULL} entry (defined in main.c). */
extern const tern_cli_command tern_cli_commands[];

/* tern inspect for a .gguf file (inspect_gguf.c). */
int tern_inspect_gguf(const char *path);

#endif
