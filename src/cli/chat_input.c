/* Multi-line input for `tern chat` (see chat_input.h). */
#include "cli/chat_input.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static const char FENCE[] = "\"\"\"";

static int is_fence(const char *line)
{
    size_t n = strlen(line);
    while (n && (line[n - 1] == ' ' || line[n - 1] == '\t' || line[n - 1] == '\r')) n--;
    return n == 3 && !memcmp(line, FENCE, 3);
}

static int append(char **buf, size_t *len, size_t *cap, const char *s, size_t n)
{
    if (*len + n + 1 > *cap) {
        size_t c = *cap ? *cap : 256;
        while (c < *len + n + 1) c *= 2;
        char *p = realloc(*buf, c);
        if (!p) return -1;
        *buf = p;
        *cap = c;
    }
    memcpy(*buf + *len, s, n);
    *len += n;
    (*buf)[*len] = '\0';
    return 0;
}

chat_in_status chat_input_read(FILE *in, FILE *prompt, char **text, int *block)
{
    *text = NULL;
    *block = 0;
    char *line = NULL, *buf = NULL;
    size_t lcap = 0, len = 0, cap = 0;
    int first = 1, in_block = 0;
    chat_in_status st = CHAT_IN_TEXT;
    for (;;) {
        if (prompt) {
            fputs(first ? ">>> " : "... ", prompt);
            fflush(prompt);
        }
        errno = 0;
        ssize_t n = getline(&line, &lcap, in);
        if (n < 0) {
            st = errno == EINTR ? CHAT_IN_INTERRUPTED : CHAT_IN_EOF;
            clearerr(in);
            /* End of input inside an unfinished input sends what was typed. */
            if (st == CHAT_IN_EOF && !first) st = CHAT_IN_TEXT;
            break;
        }
        if (n && line[n - 1] == '\n') line[--n] = '\0';
        if (n && line[n - 1] == '\r') line[--n] = '\0';
        if (in_block) {
            if (is_fence(line)) break;
            if ((len && append(&buf, &len, &cap, "\n", 1)) || append(&buf, &len, &cap, line, (size_t)n)) {
                st = CHAT_IN_NOMEM;
                break;
            }
            continue;
        }
        if (first && is_fence(line)) {
            in_block = *block = 1;
            first = 0;
            continue;
        }
        first = 0;
        int more = n && line[n - 1] == '\\';
        if (more) line[--n] = '\0';
        if (append(&buf, &len, &cap, line, (size_t)n) || (more && append(&buf, &len, &cap, "\n", 1))) {
            st = CHAT_IN_NOMEM;
            break;
        }
        if (!more) break;
    }
    free(line);
    if (st != CHAT_IN_TEXT) {
        free(buf);
        return st;
    }
    *text = buf ? buf : strdup("");
    return *text ? CHAT_IN_TEXT : CHAT_IN_NOMEM;
}
