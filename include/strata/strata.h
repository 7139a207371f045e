// Umbrella header of the Strata public API.
#pragma once

#include "strata/group.h"
#include "strata/runtime.h"
#include "strata/tensor_ops.h"
#include "strata/types.h"
#include "strata/work.h"
#include "strata/distributed_model.h"
#include "strata/data.h"
#include "strata/errors.h"
#include "strata/checkpoint.h"
#include "strata/exit_codes.h"
