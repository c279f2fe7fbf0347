#include "check.h"

#include <stdlib.h>

int check_failures;
int check_count;

int check_summary(const char *name)
{
    fprintf(stderr, "%s: %d checks, %d failed\n", name, check_count, check_failures);
    return check_failures ? 1 : 0;
}

const char *check_shared_dir(void)
{
    const char *s = getenv("TERN_SHARED");
    return s && *s ? s : "../shared";
}
