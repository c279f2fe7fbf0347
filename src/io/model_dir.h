/* Model directory lookup (declared publicly in tern/model.h; implemented in
 * model_dir.c). */
#ifndef TERN_IO_MODEL_DIR_H
#define TERN_IO_MODEL_DIR_H

#include "tern/model.h"

#endif
