// The checks of the libraries rocm-smoke opens at run time (stack.cpp).
#pragma once

#include <vector>

#include "checks.h"

std::vector<Check> stack_checks();
