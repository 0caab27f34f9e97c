// rocm-smoke: runs every check's CPU half, and its GPU half when a GPU is present.
//
// Exit codes: 0 every GPU result equals the CPU's; 1 a result differs; 2 a call failed or the
// usage was wrong; 3 no GPU here (the CPU halves ran and passed).
#include <cstdio>
#include <cstring>
#include <hip/hip_runtime.h>

#include "checks.h"

namespace {

void usage() {
    std::puts(
        "usage: rocm-smoke [--list]\n"
        "Compares GPU results with CPU results for each library of the stack that is installed\n"
        "(one that is not is listed as absent and does not count).\n"
        "Exit codes: 0 all equal, 1 a result differs, 2 a call failed, 3 no GPU (CPU half only).");
}

}  // namespace

int main(int argc, char** argv) {
    // Every line out before a library can abort the process.
    std::setvbuf(stdout, nullptr, _IOLBF, 0);
    for (int i = 1; i < argc; ++i) {
        if (std::strcmp(argv[i], "--list") == 0) {
            for (const Check& c : checks()) std::printf("%s\t%s\n", c.name, c.library);
            return 0;
        }
        usage();
        return std::strcmp(argv[i], "--help") == 0 ? 0 : 2;
    }
    std::printf("rocm-smoke %s\n", ROCM_SMOKE_VERSION);
    int devices = 0;
    hipError_t e = hipGetDeviceCount(&devices);
    bool gpu = e == hipSuccess && devices > 0;
    if (gpu) {
        hipDeviceProp_t p;
        if (hipGetDeviceProperties(&p, 0) == hipSuccess) std::printf("GPU: %s (%s)\n", p.name, p.gcnArchName);
    } else {
        std::printf("no GPU: hipGetDeviceCount: %s, %d device(s); the GPU halves are not run\n",
                    hipGetErrorString(e), devices);
    }
    int worst = 0;
    for (const Check& c : checks()) {
        Outcome o = gpu ? c.gpu() : c.cpu();
        std::printf("%-8s %-8s %-8s %s\n", o.verdict.c_str(), c.name, c.library, o.detail.c_str());
        int code = o.verdict == "fail" ? 1 : o.verdict == "error" ? 2 : 0;
        if (code == 1 || (code == 2 && worst == 0)) worst = code;
    }
    if (worst != 0) return worst;
    return gpu ? 0 : 3;
}
