#include "check.h"
#include "tern/status.h"

#include <string.h>

int main(void)
{
    CHECK(tern_error(TERN_E_FORMAT, "bad %s at %d", "header", 8) == TERN_E_FORMAT);
    CHECK(strcmp(tern_last_error(), "bad header at 8") == 0);
    CHECK(tern_error_wrap(TERN_E_FORMAT, "loading %s", "x.safetensors") == TERN_E_FORMAT);
    CHECK(strcmp(tern_last_error(), "loading x.safetensors: bad header at 8") == 0);
    CHECK(strcmp(tern_status_str(TERN_E_IO), "i/o error") == 0);
    return check_summary("status");
}
