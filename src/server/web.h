/* Static pages of the server, embedded at build time from src/server/web/
 * by scripts/embed.sh (each a NUL-terminated byte array and its length). */
#ifndef TERN_SERVER_WEB_H
#define TERN_SERVER_WEB_H

#include <stddef.h>

/* src/server/web/chat.html: the chat page served at GET /. */
extern const unsigned char srv_web_chat_html[];
extern const size_t srv_web_chat_html_len;

#endif
