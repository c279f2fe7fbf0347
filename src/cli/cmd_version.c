#include <stdio.h>

int tern_cmd_version(int argc, char **argv)
{
    (void)argc; (void)argv;
    printf("tern 0.1.0\n");
    return 0;
}
