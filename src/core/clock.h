/* The monotonic clock (declared publicly in tern/system.h). */
#ifndef TERN_CORE_CLOCK_H
#define TERN_CORE_CLOCK_H

#include "tern/system.h"

#endif
