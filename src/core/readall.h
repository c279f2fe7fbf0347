/* Reading a whole stream into memory. */
#ifndef TERN_CORE_READALL_H
#define TERN_CORE_READALL_H

#include <stdio.h>

/* Reads f (borrowed; not closed) to its end. Returns an owned NUL-terminated
 * buffer (free()), or NULL on a read error or out of memory. */
char *tern_read_all(FILE *f);

#endif
