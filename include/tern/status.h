/* tern status codes and the per-thread error message.
 *
 * Every public function that can fail returns tern_status. On failure the
 * function has also recorded a human-readable message, retrievable with
 * tern_last_error() on the same thread until the next failure overwrites it. */
#ifndef TERN_STATUS_H
#define TERN_STATUS_H

typedef enum {
    TERN_OK = 0,
    TERN_E_INVALID,      /* bad argument or malformed input */
    TERN_E_IO,           /* file missing, unreadable, short read */
    TERN_E_FORMAT,       /* file present but its content is wrong */
    TERN_E_UNSUPPORTED,  /* valid input that tern does not implement (yet) */
    TERN_E_NOMEM,        /* allocation failed */
    TERN_E_RANGE,        /* value or size out of the allowed range */
    TERN_E_STATE,        /* operation not valid in the object's current state */
    TERN_E_CANCELLED,    /* stopped on the caller's request */
    TERN_E_INTERNAL,     /* invariant broken: a bug in tern */
    TERN_E_BUSY          /* no room now (a full queue); try again later */
} tern_status;

/* Records a formatted message for the calling thread and returns code. */
tern_status tern_error(tern_status code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Returns the calling thread's last message (borrowed; valid until the next
 * tern_error on this thread). Empty string when none was recorded. */
const char *tern_last_error(void);

/* Short constant name of a status code ("invalid argument", ...). */
const char *tern_status_str(tern_status code);

/* Prefixes the current message with context ("loading X: <old message>"). */
tern_status tern_error_wrap(tern_status code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#endif
