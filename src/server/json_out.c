/* JSON text as mlx_lm.server writes it (see json_out.h). */
#include "server/json_out.h"

#include <stdlib.h>
#include <string.h>

int srv_json_append(srv_buf *out, const json_t *j)
{
    char *s = json_dumps(j, JSON_ENSURE_ASCII | JSON_ENCODE_ANY);
    if (!s) return -1;
    int rc = srv_buf_puts(out, s);
    free(s);
    return rc;
}

int srv_json_append_string(srv_buf *out, const char *s, size_t n)
{
    static const char hex[] = "0123456789ABCDEF";  /* jansson's case */
    if (srv_buf_append(out, "\"", 1)) return -1;
    size_t i = 0, run = 0;
    while (i < n) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c < 0x80 && c != '"' && c != '\\') { i++; run++; continue; }
        if (run && srv_buf_append(out, s + i - run, run)) return -1;
        run = 0;
        char esc[16];
        size_t el = 0;
        unsigned cp = c;
        size_t len = 1;
        if (c >= 0x80) {
            /* Decode one UTF-8 sequence (the text is valid UTF-8). */
            if ((c & 0xE0) == 0xC0 && i + 1 < n) { cp = (c & 0x1Fu) << 6 | ((unsigned char)s[i + 1] & 0x3Fu); len = 2; }
            else if ((c & 0xF0) == 0xE0 && i + 2 < n) {
                cp = (c & 0x0Fu) << 12 | ((unsigned char)s[i + 1] & 0x3Fu) << 6 | ((unsigned char)s[i + 2] & 0x3Fu);
                len = 3;
            } else if ((c & 0xF8) == 0xF0 && i + 3 < n) {
                cp = (c & 0x07u) << 18 | ((unsigned char)s[i + 1] & 0x3Fu) << 12 |
                     ((unsigned char)s[i + 2] & 0x3Fu) << 6 | ((unsigned char)s[i + 3] & 0x3Fu);
                len = 4;
            } else {
                cp = 0xFFFD;
            }
        }
        switch (cp) {
        case '"': memcpy(esc, "\\\"", 2); el = 2; break;
        case '\\': memcpy(esc, "\\\\", 2); el = 2; break;
        case '\b': memcpy(esc, "\\b", 2); el = 2; break;
        case '\f': memcpy(esc, "\\f", 2); el = 2; break;
        case '\n': memcpy(esc, "\\n", 2); el = 2; break;
        case '\r': memcpy(esc, "\\r", 2); el = 2; break;
        case '\t': memcpy(esc, "\\t", 2); el = 2; break;
        default:
            if (cp >= 0x10000) {
                unsigned v = cp - 0x10000, hi = 0xD800 + (v >> 10), lo = 0xDC00 + (v & 0x3FF);
                esc[0] = '\\'; esc[1] = 'u'; esc[2] = hex[hi >> 12]; esc[3] = hex[(hi >> 8) & 15];
                esc[4] = hex[(hi >> 4) & 15]; esc[5] = hex[hi & 15];
                esc[6] = '\\'; esc[7] = 'u'; esc[8] = hex[lo >> 12]; esc[9] = hex[(lo >> 8) & 15];
                esc[10] = hex[(lo >> 4) & 15]; esc[11] = hex[lo & 15];
                el = 12;
            } else {
                esc[0] = '\\'; esc[1] = 'u'; esc[2] = hex[cp >> 12]; esc[3] = hex[(cp >> 8) & 15];
                esc[4] = hex[(cp >> 4) & 15]; esc[5] = hex[cp & 15];
                el = 6;
            }
        }
        if (srv_buf_append(out, esc, el)) return -1;
        i += len;
    }
    if (run && srv_buf_append(out, s + n - run, run)) return -1;
    return srv_buf_append(out, "\"", 1);
}
