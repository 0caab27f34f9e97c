#include "reference.h"

#include <cmath>
#include <utility>

namespace reference {

std::vector<float> gemm(int m, int n, int k, const std::vector<float>& a, const std::vector<float>& b) {
    std::vector<float> c(static_cast<size_t>(m) * n, 0.0f);
    for (int j = 0; j < n; ++j) {
        for (int p = 0; p < k; ++p) {
            float bpj = b[static_cast<size_t>(j) * k + p];
            for (int i = 0; i < m; ++i) c[static_cast<size_t>(j) * m + i] += a[static_cast<size_t>(p) * m + i] * bpj;
        }
    }
    return c;
}

std::vector<std::complex<double>> dft(const std::vector<std::complex<float>>& x) {
    const size_t n = x.size();
    const double pi = std::acos(-1.0);
    std::vector<std::complex<double>> out(n);
    for (size_t k = 0; k < n; ++k) {
        std::complex<double> sum = 0;
        for (size_t j = 0; j < n; ++j) {
            double angle = -2.0 * pi * static_cast<double>((j * k) % n) / static_cast<double>(n);
            sum += std::complex<double>(x[j]) * std::complex<double>(std::cos(angle), std::sin(angle));
        }
        out[k] = sum;
    }
    return out;
}

std::vector<float> csrmv(int rows, const std::vector<int>& row_ptr, const std::vector<int>& col,
                         const std::vector<float>& val, const std::vector<float>& x) {
    std::vector<float> y(rows, 0.0f);
    for (int r = 0; r < rows; ++r) {
        for (int i = row_ptr[r]; i < row_ptr[r + 1]; ++i) y[r] += val[i] * x[col[i]];
    }
    return y;
}

std::vector<double> solve(int n, const std::vector<float>& a_in, const std::vector<float>& b_in) {
    std::vector<double> a(a_in.begin(), a_in.end()), b(b_in.begin(), b_in.end());
    auto at = [&](int i, int j) -> double& { return a[static_cast<size_t>(j) * n + i]; };
    for (int c = 0; c < n; ++c) {
        int pivot = c;
        for (int r = c + 1; r < n; ++r) {
            if (std::fabs(at(r, c)) > std::fabs(at(pivot, c))) pivot = r;
        }
        if (pivot != c) {
            for (int j = 0; j < n; ++j) std::swap(at(c, j), at(pivot, j));
            std::swap(b[c], b[pivot]);
        }
        for (int r = c + 1; r < n; ++r) {
            double f = at(r, c) / at(c, c);
            for (int j = c; j < n; ++j) at(r, j) -= f * at(c, j);
            b[r] -= f * b[c];
        }
    }
    std::vector<double> x(n);
    for (int r = n - 1; r >= 0; --r) {
        double s = b[r];
        for (int j = r + 1; j < n; ++j) s -= at(r, j) * x[j];
        x[r] = s / at(r, r);
    }
    return x;
}

std::vector<float> conv2d(int n, int r, const std::vector<float>& image, const std::vector<float>& filter) {
    const int o = n - r + 1;
    std::vector<float> out(static_cast<size_t>(o) * o, 0.0f);
    for (int y = 0; y < o; ++y) {
        for (int x = 0; x < o; ++x) {
            float s = 0;
            for (int i = 0; i < r; ++i) {
                for (int j = 0; j < r; ++j) s += image[(y + i) * n + (x + j)] * filter[i * r + j];
            }
            out[y * o + x] = s;
        }
    }
    return out;
}

std::vector<float> integers(size_t n, int range, uint32_t seed) {
    // A linear congruential sequence: the same values on every machine and compiler.
    std::vector<float> v(n);
    uint32_t s = seed;
    for (size_t i = 0; i < n; ++i) {
        s = s * 1664525u + 1013904223u;
        v[i] = static_cast<float>(static_cast<int>((s >> 16) % static_cast<uint32_t>(2 * range + 1)) - range);
    }
    return v;
}

Mlp mlp_problem() {
    Mlp m;
    // Weights and inputs in [-1, 1] in steps of 1/8; the target is a fixed linear function of
    // the inputs, which the model can fit.
    auto scaled = [](size_t n, uint32_t seed) {
        auto v = integers(n, 8, seed);
        for (float& x : v) x /= 8.0f;
        return v;
    };
    m.w1 = scaled(static_cast<size_t>(m.hidden) * m.in, 11);
    m.w2 = scaled(static_cast<size_t>(m.out) * m.hidden, 12);
    for (float& w : m.w1) w *= 0.5f;
    for (float& w : m.w2) w *= 0.5f;
    m.x = scaled(static_cast<size_t>(m.in) * m.batch, 13);
    m.y.assign(static_cast<size_t>(m.out) * m.batch, 0.0f);
    for (int b = 0; b < m.batch; ++b) {
        float t = 0;
        for (int i = 0; i < m.in; ++i) t += (i % 2 == 0 ? 0.5f : -0.25f) * m.x[static_cast<size_t>(b) * m.in + i];
        m.y[b] = t;
    }
    return m;
}

std::vector<float> train(Mlp m, int steps, float rate) {
    std::vector<float> losses;
    const int in = m.in, hid = m.hidden, out = m.out, bat = m.batch;
    for (int s = 0; s < steps; ++s) {
        auto h = gemm(hid, bat, in, m.w1, m.x);
        std::vector<float> a(h.size());
        for (size_t i = 0; i < h.size(); ++i) a[i] = h[i] > 0 ? h[i] : 0;
        auto p = gemm(out, bat, hid, m.w2, a);
        float loss = 0;
        std::vector<float> dp(p.size());
        for (size_t i = 0; i < p.size(); ++i) {
            float d = p[i] - m.y[i];
            loss += d * d;
            dp[i] = 2.0f * d / static_cast<float>(p.size());
        }
        losses.push_back(loss / static_cast<float>(p.size()));
        // dW2 = dP·Aᵀ, dA = W2ᵀ·dP, dH = dA where H > 0, dW1 = dH·Xᵀ.
        std::vector<float> dw2(static_cast<size_t>(out) * hid, 0.0f), da(static_cast<size_t>(hid) * bat, 0.0f);
        for (int b = 0; b < bat; ++b) {
            for (int o = 0; o < out; ++o) {
                float g = dp[static_cast<size_t>(b) * out + o];
                for (int j = 0; j < hid; ++j) {
                    dw2[static_cast<size_t>(j) * out + o] += g * a[static_cast<size_t>(b) * hid + j];
                    da[static_cast<size_t>(b) * hid + j] += m.w2[static_cast<size_t>(j) * out + o] * g;
                }
            }
        }
        std::vector<float> dw1(static_cast<size_t>(hid) * in, 0.0f);
        for (int b = 0; b < bat; ++b) {
            for (int j = 0; j < hid; ++j) {
                float g = h[static_cast<size_t>(b) * hid + j] > 0 ? da[static_cast<size_t>(b) * hid + j] : 0;
                for (int i = 0; i < in; ++i) dw1[static_cast<size_t>(i) * hid + j] += g * m.x[static_cast<size_t>(b) * in + i];
            }
        }
        for (size_t i = 0; i < m.w1.size(); ++i) m.w1[i] -= rate * dw1[i];
        for (size_t i = 0; i < m.w2.size(); ++i) m.w2[i] -= rate * dw2[i];
    }
    return losses;
}

}  // namespace reference
