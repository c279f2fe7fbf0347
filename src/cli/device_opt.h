/* --device cpu|cuda[:N] for every command that runs a model.
 *
 * main.c takes the option out of argv before the command parses the rest,
 * so each command sees only its own options; the choice is then read with
 * cli_device(). A CUDA choice is checked before the command starts: without
 * a usable GPU the process exits with the CUDA runtime's reason. */
#ifndef TERN_CLI_DEVICE_OPT_H
#define TERN_CLI_DEVICE_OPT_H

typedef enum { CLI_DEVICE_CPU = 0, CLI_DEVICE_CUDA = 1 } cli_device_kind;

/* Removes every "--device V" / "--device=V" from argv (argv[0] stays) and
 * records the last one (TERN_DEVICE sets the default); the choice is left in
 * TERN_DEVICE, where tern_model_load finds it. Returns 0, or 2 after
 * printing a usage error, or 1 after printing why the device is unusable. */
int cli_take_device(int *argc, char **argv);

/* The recorded choice and a description ("cpu", "cuda:0 NVIDIA H200 (...)"),
 * borrowed, static storage. */
cli_device_kind cli_device(void);
const char *cli_device_name(void);

#endif
