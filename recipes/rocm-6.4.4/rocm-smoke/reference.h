// The CPU halves of the library checks: plain loops whose answers do not depend on a library,
// each with a property of its own that the check verifies before trusting it.
#pragma once

#include <complex>
#include <cstdint>
#include <vector>

namespace reference {

// Column-major C(m×n) = A(m×k) · B(k×n).
std::vector<float> gemm(int m, int n, int k, const std::vector<float>& a, const std::vector<float>& b);

// The discrete Fourier transform, forward (e^{-2πi jk/n}), in double precision.
std::vector<std::complex<double>> dft(const std::vector<std::complex<float>>& x);

// y = A·x for a CSR matrix.
std::vector<float> csrmv(int rows, const std::vector<int>& row_ptr, const std::vector<int>& col,
                         const std::vector<float>& val, const std::vector<float>& x);

// Solves A·x = b (column-major n×n) by LU with partial pivoting, in double precision.
std::vector<double> solve(int n, const std::vector<float>& a, const std::vector<float>& b);

// A 2-D cross-correlation (what deep-learning libraries call a convolution) of one n×n image with
// one r×r filter, no padding, stride 1: an (n-r+1)×(n-r+1) result, row-major.
std::vector<float> conv2d(int n, int r, const std::vector<float>& image, const std::vector<float>& filter);

// A small model trained by gradient descent: y = W2·relu(W1·x) on a fixed regression task.
struct Mlp {
    int in = 8, hidden = 16, out = 1, batch = 32;
    std::vector<float> w1, w2;  // column-major hidden×in, out×hidden
    std::vector<float> x, y;    // column-major in×batch, out×batch
};
Mlp mlp_problem();
// One step's loss (mean squared error before the update), for each of `steps` steps.
std::vector<float> train(Mlp m, int steps, float rate);

// Deterministic small integers in [-range, range], so sums of products are exact in float.
std::vector<float> integers(size_t n, int range, uint32_t seed);

}  // namespace reference
