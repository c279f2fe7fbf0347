/* Minimal assertion helpers shared by the unit-test programs. A test program
 * calls CHECK(...) freely and ends with `return check_summary("name");`, which
 * prints the counts and exits non-zero if any check failed. */
#ifndef TERN_TEST_CHECK_H
#define TERN_TEST_CHECK_H

#include <stdio.h>

extern int check_failures;
extern int check_count;

#define CHECK(cond) do { check_count++; if (!(cond)) { check_failures++; \
    fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); } } while (0)
#define CHECK_MSG(cond, ...) do { check_count++; if (!(cond)) { check_failures++; \
    fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond); \
    fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); } } while (0)

int check_summary(const char *name);

/* Path of the shared folder (TERN_SHARED env or ../shared), borrowed. */
const char *check_shared_dir(void);

#endif
