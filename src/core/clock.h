/* Monotonic wall-clock time for timings. */
#ifndef TERN_CORE_CLOCK_H
#define TERN_CORE_CLOCK_H

/* Seconds on the monotonic clock (arbitrary origin). */
double tern_now(void);

#endif
