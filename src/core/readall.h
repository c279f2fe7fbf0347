/* Reading a whole stream into memory (declared publicly in tern/system.h). */
#ifndef TERN_CORE_READALL_H
#define TERN_CORE_READALL_H

#include "tern/system.h"

#endif
