#!/bin/sh
# embed.sh NAME FILE: writes to stdout a C file that defines
#   const unsigned char NAME[]   the bytes of FILE followed by a NUL
#   const size_t NAME_len        the byte count of FILE
# so that a static file ships inside the binary. POSIX od and sed only.
set -eu
name=$1
file=$2
printf '/* Generated from %s by scripts/embed.sh. */\n#include <stddef.h>\n\n' "$file"
printf 'extern const unsigned char %s[];\nextern const size_t %s_len;\n' "$name" "$name"
printf 'const unsigned char %s[] = {\n' "$name"
od -An -v -tx1 "$file" | sed -e 's/ *\([0-9a-f][0-9a-f]\)/0x\1,/g'
printf '0x00};\nconst size_t %s_len = sizeof %s - 1;\n' "$name" "$name"
