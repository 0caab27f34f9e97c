#include "checks.h"
#include "stack.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <hip/hip_runtime.h>
#include <rocrand/rocrand.h>

namespace {

std::string hip_error(const char* call, hipError_t e) {
    return std::string(call) + ": " + hipGetErrorString(e);
}

// --- a kernel of our own: the code object for this processor is loaded and runs ---

__global__ void saxpy(float a, const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        y[i] = a * x[i] + y[i];
    }
}

constexpr int kSaxpyN = 1 << 16;

std::vector<float> saxpy_on_cpu() {
    std::vector<float> y(kSaxpyN);
    for (int i = 0; i < kSaxpyN; ++i) {
        float x = static_cast<float>(i % 97) * 0.25f;
        y[i] = 2.5f * x + static_cast<float>(i % 13);
    }
    return y;
}

Outcome saxpy_cpu() {
    auto y = saxpy_on_cpu();
    // Every value is exact in binary floating point, so the CPU half knows its answer.
    bool ok = y[1] == 2.5f * 0.25f + 1.0f && y[kSaxpyN - 1] == 2.5f * (65535 % 97) * 0.25f + 65535 % 13;
    return {ok ? "cpu-only" : "fail", ok ? "65536 values computed on the CPU" : "the CPU result is wrong"};
}

Outcome saxpy_gpu() {
    std::vector<float> x(kSaxpyN), y(kSaxpyN);
    for (int i = 0; i < kSaxpyN; ++i) {
        x[i] = static_cast<float>(i % 97) * 0.25f;
        y[i] = static_cast<float>(i % 13);
    }
    float *dx = nullptr, *dy = nullptr;
    hipError_t e;
    if ((e = hipMalloc(&dx, kSaxpyN * sizeof(float))) != hipSuccess) return {"error", hip_error("hipMalloc", e)};
    if ((e = hipMalloc(&dy, kSaxpyN * sizeof(float))) != hipSuccess) {
        (void)hipFree(dx);
        return {"error", hip_error("hipMalloc", e)};
    }
    e = hipMemcpy(dx, x.data(), kSaxpyN * sizeof(float), hipMemcpyHostToDevice);
    if (e == hipSuccess) e = hipMemcpy(dy, y.data(), kSaxpyN * sizeof(float), hipMemcpyHostToDevice);
    if (e == hipSuccess) {
        saxpy<<<kSaxpyN / 256, 256>>>(2.5f, dx, dy, kSaxpyN);
        e = hipGetLastError();
    }
    if (e == hipSuccess) e = hipMemcpy(y.data(), dy, kSaxpyN * sizeof(float), hipMemcpyDeviceToHost);
    (void)hipFree(dx);
    (void)hipFree(dy);
    if (e != hipSuccess) return {"error", hip_error("saxpy kernel", e)};
    auto want = saxpy_on_cpu();
    for (int i = 0; i < kSaxpyN; ++i) {
        if (y[i] != want[i]) {
            char buf[160];
            std::snprintf(buf, sizeof buf, "element %d: GPU %g, CPU %g", i, y[i], want[i]);
            return {"fail", buf};
        }
    }
    return {"pass", "65536 values, GPU equal to CPU bit for bit"};
}

// --- rocRAND: its device generator against a CPU implementation of the same algorithm ---
//
// rocRAND's own host generator cannot be the CPU half: it allocates device memory and aborts
// without a device. Philox4x32-10 is specified exactly (Salmon et al., "Parallel random numbers:
// as easy as 1, 2, 3", SC 2011), so this file computes it itself: number n of the stream for a
// seed is word n % 4 of the block for counter n / 4, keyed by the seed.

struct Block {
    uint32_t w[4];
};

Block philox4x32_10(uint64_t counter, uint64_t seed) {
    uint32_t c[4] = {static_cast<uint32_t>(counter), static_cast<uint32_t>(counter >> 32), 0, 0};
    uint32_t k[2] = {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)};
    for (int round = 0; round < 10; ++round) {
        uint64_t p0 = uint64_t{0xD2511F53u} * c[0];
        uint64_t p1 = uint64_t{0xCD9E8D57u} * c[2];
        uint32_t next[4] = {static_cast<uint32_t>(p1 >> 32) ^ c[1] ^ k[0], static_cast<uint32_t>(p1),
                            static_cast<uint32_t>(p0 >> 32) ^ c[3] ^ k[1], static_cast<uint32_t>(p0)};
        std::memcpy(c, next, sizeof c);
        k[0] += 0x9E3779B9u;
        k[1] += 0xBB67AE85u;
    }
    return {{c[0], c[1], c[2], c[3]}};
}

constexpr size_t kRandN = 1 << 20;
constexpr unsigned long long kSeed = 20261205ULL;

std::vector<unsigned int> rand_on_cpu() {
    std::vector<unsigned int> v(kRandN);
    for (size_t i = 0; i < kRandN; i += 4) {
        Block b = philox4x32_10(i / 4, kSeed);
        for (size_t j = 0; j < 4; ++j) v[i + j] = b.w[j];
    }
    return v;
}

Outcome rand_cpu() {
    // The published known answer (Random123's kat_vectors): counter 0, key 0.
    Block kat = philox4x32_10(0, 0);
    const uint32_t want[4] = {0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u};
    if (std::memcmp(kat.w, want, sizeof want) != 0) {
        return {"fail", "the CPU philox4x32-10 misses its known answer"};
    }
    auto v = rand_on_cpu();
    // A uniform 32-bit stream: 2^20 draws average 2^31 within a few parts in ten thousand.
    double mean = 0;
    for (unsigned int x : v) mean += x;
    mean /= static_cast<double>(v.size()) * 4294967296.0;
    char buf[160];
    std::snprintf(buf, sizeof buf, "philox4x32-10 on the CPU: known answer, %zu numbers, mean %.5f of the range",
                  v.size(), mean);
    return {std::fabs(mean - 0.5) < 0.002 ? "cpu-only" : "fail", buf};
}

Outcome rand_gpu() {
    unsigned int* d = nullptr;
    hipError_t e = hipMalloc(&d, kRandN * sizeof(unsigned int));
    if (e != hipSuccess) return {"error", hip_error("hipMalloc", e)};
    rocrand_generator g = nullptr;
    rocrand_status s = rocrand_create_generator(&g, ROCRAND_RNG_PSEUDO_PHILOX4_32_10);
    if (s == ROCRAND_STATUS_SUCCESS) {
        rocrand_set_seed(g, kSeed);
        s = rocrand_generate(g, d, kRandN);
        rocrand_destroy_generator(g);
    }
    std::vector<unsigned int> got(kRandN);
    if (s == ROCRAND_STATUS_SUCCESS) e = hipMemcpy(got.data(), d, kRandN * sizeof(unsigned int), hipMemcpyDeviceToHost);
    (void)hipFree(d);
    if (s != ROCRAND_STATUS_SUCCESS) return {"error", "rocrand_generate on the GPU: status " + std::to_string(s)};
    if (e != hipSuccess) return {"error", hip_error("hipMemcpy", e)};
    auto want = rand_on_cpu();
    for (size_t i = 0; i < kRandN; ++i) {
        if (got[i] != want[i]) {
            char buf[160];
            std::snprintf(buf, sizeof buf, "number %zu: GPU %u, CPU %u", i, got[i], want[i]);
            return {"fail", buf};
        }
    }
    return {"pass", "philox4x32-10, 1048576 numbers, rocRAND on the GPU equal to the CPU's"};
}

}  // namespace

const std::vector<Check>& checks() {
    static const std::vector<Check> all = [] {
        std::vector<Check> v = {
            {"kernel", "HIP", saxpy_cpu, saxpy_gpu},
            {"random", "rocRAND", rand_cpu, rand_gpu},
        };
        for (const Check& c : stack_checks()) v.push_back(c);
        return v;
    }();
    return all;
}
