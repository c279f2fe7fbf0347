#include "tern/status.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* Large enough for a file path plus a sentence; longer messages are cut. */
static _Thread_local char last_msg[1024];

tern_status tern_error(tern_status code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_msg, sizeof last_msg, fmt, ap);
    va_end(ap);
    return code;
}

tern_status tern_error_wrap(tern_status code, const char *fmt, ...)
{
    char prefix[512], old[sizeof last_msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, last_msg, sizeof old);
    snprintf(last_msg, sizeof last_msg, "%s: %s", prefix, old);
    return code;
}

const char *tern_last_error(void)
{
    return last_msg;
}

const char *tern_status_str(tern_status code)
{
    switch (code) {
    case TERN_OK: return "ok";
    case TERN_E_INVALID: return "invalid argument";
    case TERN_E_IO: return "i/o error";
    case TERN_E_FORMAT: return "format error";
    case TERN_E_UNSUPPORTED: return "unsupported";
    case TERN_E_NOMEM: return "out of memory";
    case TERN_E_RANGE: return "out of range";
    case TERN_E_STATE: return "invalid state";
    case TERN_E_CANCELLED: return "cancelled";
    case TERN_E_INTERNAL: return "internal error";
    case TERN_E_BUSY: return "busy";
    }
    return "unknown status";
}
