// One check: a computation done on the CPU and, when a GPU is present, on the GPU, with the
// two results compared.
#pragma once

#include <string>
#include <vector>

struct Outcome {
    // "pass", "fail" (the results differ), "error" (a call failed), "cpu-only", or "absent" (the
    // library is not installed here: not a failure, the check does not apply).
    std::string verdict;
    std::string detail;
};

struct Check {
    const char* name;
    const char* library;
    // Runs the CPU half alone; its own result is checked against what is known of it.
    Outcome (*cpu)();
    // Runs both halves and compares them; called only when a GPU is present.
    Outcome (*gpu)();
};

const std::vector<Check>& checks();
