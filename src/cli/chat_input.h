/* Reads one input of `tern chat` from a stream, with its multi-line
 * convention:
 *   - a line ending in a backslash continues on the next line (the backslash
 *     becomes a newline);
 *   - a line that is exactly """ opens a block that runs, verbatim, until the
 *     next line that is exactly """ (a block is never read as a /command).
 * Prompts (">>> " first, "... " on continuation lines) go to the prompt stream
 * when it is not NULL. */
#ifndef TERN_CLI_CHAT_INPUT_H
#define TERN_CLI_CHAT_INPUT_H

#include <stdio.h>

typedef enum {
    CHAT_IN_TEXT,        /* *text holds an input */
    CHAT_IN_EOF,         /* end of input (Ctrl-D at an empty prompt) */
    CHAT_IN_INTERRUPTED, /* a signal interrupted the read (Ctrl-C); the partial input is dropped */
    CHAT_IN_NOMEM
} chat_in_status;

/* in and prompt borrowed. On CHAT_IN_TEXT *text is owned (free()), without
 * the final newline, and *block is 1 when it came from a """ block. */
chat_in_status chat_input_read(FILE *in, FILE *prompt, char **text, int *block);

#endif
