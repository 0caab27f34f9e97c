// The checks of the stack's libraries, each opened at run time (library.h): matrix product
// (rocBLAS), FFT (rocFFT), sparse product (rocSPARSE), linear solve (rocSOLVER), convolution
// (MIOpen) and a 50-step training loop of a small model (rocBLAS and kernels of our own).
//
// The few declarations each check needs are written here, as the libraries' C headers declare
// them in ROCm 6.4 (rocm_api.h), so that building rocm-smoke needs none of these libraries.
#include "stack.h"

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstdio>
#include <hip/hip_runtime.h>

#include "library.h"
#include "reference.h"
#include "rocm_api.h"

namespace {

std::string format(const char* fmt, double a = 0, double b = 0, double c = 0) {
    char buf[256];
    std::snprintf(buf, sizeof buf, fmt, a, b, c);
    return buf;
}

// Why a library cannot be checked: not installed (the check does not apply), or installed and
// unloadable (an error: a user who installed it expects it to load). `done` says what the CPU
// half did before.
Outcome unloadable(const Library& lib, const std::string& done = "") {
    std::string prefix = done.empty() ? "" : done + "; ";
    if (lib.absent()) return {"absent", prefix + lib.soname() + " is not installed here"};
    return {"error", prefix + lib.soname() + " does not load: " + lib.error()};
}

Outcome missing(const Library& lib) {
    return {"error", std::string(lib.soname()) + " lacks " + lib.missing()};
}

// Device memory freed on every path out of a check.
template <typename T>
struct Device {
    T* p = nullptr;
    size_t n = 0;
    hipError_t error = hipSuccess;
    explicit Device(size_t count) : n(count) { error = hipMalloc(&p, count * sizeof(T)); }
    Device(const std::vector<T>& host) : Device(host.size()) {
        if (error == hipSuccess) error = hipMemcpy(p, host.data(), n * sizeof(T), hipMemcpyHostToDevice);
    }
    ~Device() {
        if (p != nullptr) (void)hipFree(p);
    }
    Device(const Device&) = delete;
    Device& operator=(const Device&) = delete;
    std::vector<T> read(hipError_t& e) const {
        std::vector<T> host(n);
        e = hipMemcpy(host.data(), p, n * sizeof(T), hipMemcpyDeviceToHost);
        return host;
    }
};

// The largest difference between two results, relative to the larger magnitude of the CPU's.
template <typename A, typename B>
double relative_error(const std::vector<A>& got, const std::vector<B>& want) {
    double scale = 0, worst = 0;
    for (const B& w : want) scale = std::max(scale, static_cast<double>(std::abs(w)));
    for (size_t i = 0; i < want.size(); ++i) {
        worst = std::max(worst, static_cast<double>(std::abs(static_cast<B>(got[i]) - want[i])));
    }
    return scale > 0 ? worst / scale : worst;
}

// --- matrix product (rocBLAS) -----------------------------------------------------------------
// Small integers: every sum of products is exact in float, so the GPU must equal the CPU bit for
// bit whatever order its kernel adds in.

constexpr int kM = 96, kN = 80, kK = 128;

struct Gemm {
    std::vector<float> a = reference::integers(static_cast<size_t>(kM) * kK, 4, 1);
    std::vector<float> b = reference::integers(static_cast<size_t>(kK) * kN, 4, 2);
};

struct Blas {
    Library lib{"librocblas.so.4"};
    decltype(&rocblas_create_handle) create = lib.get<decltype(&rocblas_create_handle)>("rocblas_create_handle");
    decltype(&rocblas_destroy_handle) destroy = lib.get<decltype(&rocblas_destroy_handle)>("rocblas_destroy_handle");
    decltype(&rocblas_sgemm) sgemm = lib.get<decltype(&rocblas_sgemm)>("rocblas_sgemm");
};

Outcome matmul_cpu() {
    Gemm g;
    auto c = reference::gemm(kM, kN, kK, g.a, g.b);
    // Checked against a second product: A·(B·e) must equal (A·B)·e for the ones vector e.
    std::vector<float> ones(kN, 1.0f);
    auto be = reference::gemm(kK, 1, kN, g.b, ones);
    auto abe = reference::gemm(kM, 1, kK, g.a, be);
    auto ce = reference::gemm(kM, 1, kN, c, ones);
    if (abe != ce) return {"fail", "the CPU product is not associative: its loops are wrong"};
    std::string done = format("%gx%gx%g product on the CPU, checked", kM, kN, kK);
    Blas blas;
    if (!blas.lib.loaded()) return unloadable(blas.lib, done);
    if (!blas.lib.missing().empty()) return missing(blas.lib);
    return {"cpu-only", done + "; librocblas.so.4 loads"};
}

Outcome matmul_gpu() {
    Blas blas;
    if (!blas.lib.loaded()) return unloadable(blas.lib);
    if (!blas.lib.missing().empty()) return missing(blas.lib);
    Gemm g;
    Device<float> da(g.a), db(g.b), dc(static_cast<size_t>(kM) * kN);
    if (da.error || db.error || dc.error) return {"error", "hipMalloc/hipMemcpy failed"};
    rocblas_handle h = nullptr;
    if (blas.create(&h) != rocblas_status_success) return {"error", "rocblas_create_handle failed"};
    const float one = 1.0f, zero = 0.0f;
    rocblas_status s = blas.sgemm(h, rocblas_operation_none, rocblas_operation_none, kM, kN, kK, &one, da.p, kM,
                                  db.p, kK, &zero, dc.p, kM);
    hipError_t e = hipDeviceSynchronize();
    blas.destroy(h);
    if (s != rocblas_status_success) return {"error", format("rocblas_sgemm: status %g", s)};
    auto got = dc.read(e);
    if (e != hipSuccess) return {"error", std::string("hipMemcpy: ") + hipGetErrorString(e)};
    auto want = reference::gemm(kM, kN, kK, g.a, g.b);
    for (size_t i = 0; i < want.size(); ++i) {
        if (got[i] != want[i]) return {"fail", format("element %g: GPU %g, CPU %g", i, got[i], want[i])};
    }
    return {"pass", format("%gx%gx%g product, GPU equal to CPU bit for bit", kM, kN, kK)};
}

// --- FFT (rocFFT) -----------------------------------------------------------------------------

constexpr size_t kFft = 256;

std::vector<std::complex<float>> fft_input() {
    auto re = reference::integers(kFft, 8, 3), im = reference::integers(kFft, 8, 4);
    std::vector<std::complex<float>> x(kFft);
    for (size_t i = 0; i < kFft; ++i) x[i] = {re[i], im[i]};
    return x;
}

struct Fft {
    Library lib{"librocfft.so.0"};
    decltype(&rocfft_setup) setup = lib.get<decltype(&rocfft_setup)>("rocfft_setup");
    decltype(&rocfft_plan_create) plan_create = lib.get<decltype(&rocfft_plan_create)>("rocfft_plan_create");
    decltype(&rocfft_plan_get_work_buffer_size) work_size =
        lib.get<decltype(&rocfft_plan_get_work_buffer_size)>("rocfft_plan_get_work_buffer_size");
    decltype(&rocfft_execution_info_create) info_create =
        lib.get<decltype(&rocfft_execution_info_create)>("rocfft_execution_info_create");
    decltype(&rocfft_execution_info_set_work_buffer) info_work =
        lib.get<decltype(&rocfft_execution_info_set_work_buffer)>("rocfft_execution_info_set_work_buffer");
    decltype(&rocfft_execute) execute = lib.get<decltype(&rocfft_execute)>("rocfft_execute");
    decltype(&rocfft_execution_info_destroy) info_destroy =
        lib.get<decltype(&rocfft_execution_info_destroy)>("rocfft_execution_info_destroy");
    decltype(&rocfft_plan_destroy) plan_destroy = lib.get<decltype(&rocfft_plan_destroy)>("rocfft_plan_destroy");
};

Outcome fft_cpu() {
    auto x = fft_input();
    auto f = reference::dft(x);
    // Parseval: the transform's energy is n times the signal's.
    double ex = 0, ef = 0;
    for (auto v : x) ex += std::norm(std::complex<double>(v));
    for (auto v : f) ef += std::norm(v);
    if (std::fabs(ef - ex * kFft) > 1e-6 * ef) return {"fail", "the CPU transform breaks Parseval's identity"};
    std::string done = format("%g-point complex transform on the CPU, Parseval holds", kFft);
    Fft fft;
    if (!fft.lib.loaded()) return unloadable(fft.lib, done);
    if (!fft.lib.missing().empty()) return missing(fft.lib);
    return {"cpu-only", done + "; librocfft.so.0 loads"};
}

Outcome fft_gpu() {
    Fft fft;
    if (!fft.lib.loaded()) return unloadable(fft.lib);
    if (!fft.lib.missing().empty()) return missing(fft.lib);
    auto x = fft_input();
    Device<std::complex<float>> d(x);
    if (d.error) return {"error", "hipMalloc/hipMemcpy failed"};
    if (fft.setup() != rocfft_status_success) return {"error", "rocfft_setup failed"};
    rocfft_plan plan = nullptr;
    size_t length = kFft;
    if (fft.plan_create(&plan, rocfft_placement_inplace, rocfft_transform_type_complex_forward,
                        rocfft_precision_single, 1, &length, 1, nullptr) != rocfft_status_success) {
        return {"error", "rocfft_plan_create failed"};
    }
    size_t work = 0;
    fft.work_size(plan, &work);
    Device<char> buffer(std::max<size_t>(work, 1));
    rocfft_execution_info info = nullptr;
    fft.info_create(&info);
    if (work > 0) fft.info_work(info, buffer.p, work);
    void* in[1] = {d.p};
    rocfft_status s = fft.execute(plan, in, nullptr, info);
    hipError_t e = hipDeviceSynchronize();
    fft.info_destroy(info);
    fft.plan_destroy(plan);
    if (s != rocfft_status_success) return {"error", format("rocfft_execute: status %g", s)};
    auto got = d.read(e);
    if (e != hipSuccess) return {"error", std::string("hipMemcpy: ") + hipGetErrorString(e)};
    double err = relative_error(got, reference::dft(x));
    // Single precision over log2(256) = 8 butterfly stages: a few units in the 7th digit.
    return {err < 1e-5 ? "pass" : "fail", format("%g-point transform, largest GPU/CPU difference %.2e of the largest value", kFft, err)};
}

// --- sparse product (rocSPARSE) ---------------------------------------------------------------

constexpr int kRows = 200;

struct Csr {
    std::vector<int> row_ptr{0}, col;
    std::vector<float> val;
    std::vector<float> x = reference::integers(kRows, 5, 5);
    Csr() {
        // A band matrix with a few far entries, integer values: exact sums.
        auto v = reference::integers(kRows * 5, 6, 6);
        size_t next = 0;
        for (int r = 0; r < kRows; ++r) {
            for (int c : {r - 1, r, r + 1, (r * 7) % kRows, (r * 13 + 5) % kRows}) {
                if (c < 0 || c >= kRows) continue;
                if (std::find(col.begin() + row_ptr.back(), col.end(), c) != col.end()) continue;
                col.push_back(c);
                val.push_back(v[next++]);
            }
            std::sort(col.begin() + row_ptr.back(), col.end());
            row_ptr.push_back(static_cast<int>(col.size()));
        }
    }
};

struct Sparse {
    Library lib{"librocsparse.so.1"};
    decltype(&rocsparse_create_handle) create = lib.get<decltype(&rocsparse_create_handle)>("rocsparse_create_handle");
    decltype(&rocsparse_destroy_handle) destroy = lib.get<decltype(&rocsparse_destroy_handle)>("rocsparse_destroy_handle");
    decltype(&rocsparse_create_mat_descr) descr_create =
        lib.get<decltype(&rocsparse_create_mat_descr)>("rocsparse_create_mat_descr");
    decltype(&rocsparse_destroy_mat_descr) descr_destroy =
        lib.get<decltype(&rocsparse_destroy_mat_descr)>("rocsparse_destroy_mat_descr");
    decltype(&rocsparse_scsrmv) csrmv = lib.get<decltype(&rocsparse_scsrmv)>("rocsparse_scsrmv");
};

Outcome sparse_cpu() {
    Csr m;
    auto y = reference::csrmv(kRows, m.row_ptr, m.col, m.val, m.x);
    // The same product from the dense matrix.
    std::vector<float> dense(static_cast<size_t>(kRows) * kRows, 0.0f);
    for (int r = 0; r < kRows; ++r) {
        for (int i = m.row_ptr[r]; i < m.row_ptr[r + 1]; ++i) dense[static_cast<size_t>(m.col[i]) * kRows + r] = m.val[i];
    }
    if (reference::gemm(kRows, 1, kRows, dense, m.x) != y) return {"fail", "the CPU sparse product disagrees with the dense one"};
    std::string done = format("%gx%g CSR product with %g entries on the CPU, checked", kRows, kRows,
                              static_cast<double>(m.val.size()));
    Sparse sp;
    if (!sp.lib.loaded()) return unloadable(sp.lib, done);
    if (!sp.lib.missing().empty()) return missing(sp.lib);
    return {"cpu-only", done + "; librocsparse.so.1 loads"};
}

Outcome sparse_gpu() {
    Sparse sp;
    if (!sp.lib.loaded()) return unloadable(sp.lib);
    if (!sp.lib.missing().empty()) return missing(sp.lib);
    Csr m;
    Device<int> rp(m.row_ptr), ci(m.col);
    Device<float> v(m.val), x(m.x), y(kRows);
    if (rp.error || ci.error || v.error || x.error || y.error) return {"error", "hipMalloc/hipMemcpy failed"};
    rocsparse_handle h = nullptr;
    rocsparse_mat_descr descr = nullptr;
    if (sp.create(&h) != rocsparse_status_success) return {"error", "rocsparse_create_handle failed"};
    sp.descr_create(&descr);
    const float one = 1.0f, zero = 0.0f;
    rocsparse_status s = sp.csrmv(h, rocsparse_operation_none, kRows, kRows, static_cast<int>(m.val.size()), &one, descr,
                                  v.p, rp.p, ci.p, nullptr, x.p, &zero, y.p);
    hipError_t e = hipDeviceSynchronize();
    sp.descr_destroy(descr);
    sp.destroy(h);
    if (s != rocsparse_status_success) return {"error", format("rocsparse_scsrmv: status %g", s)};
    auto got = y.read(e);
    if (e != hipSuccess) return {"error", std::string("hipMemcpy: ") + hipGetErrorString(e)};
    auto want = reference::csrmv(kRows, m.row_ptr, m.col, m.val, m.x);
    for (int i = 0; i < kRows; ++i) {
        if (got[i] != want[i]) return {"fail", format("row %g: GPU %g, CPU %g", i, got[i], want[i])};
    }
    return {"pass", format("%gx%g CSR product, GPU equal to CPU bit for bit", kRows, kRows)};
}

// --- linear solve (rocSOLVER) -----------------------------------------------------------------

constexpr int kSolveN = 64;

struct System {
    std::vector<float> a = reference::integers(static_cast<size_t>(kSolveN) * kSolveN, 3, 7);
    std::vector<float> b = reference::integers(kSolveN, 9, 8);
    System() {
        // Diagonally dominant: well conditioned, so float and double solutions agree closely.
        for (int i = 0; i < kSolveN; ++i) a[static_cast<size_t>(i) * kSolveN + i] = 4.0f * kSolveN;
    }
};

struct Solver {
    Library blas_lib{"librocblas.so.4"};
    Library lib{"librocsolver.so.0"};
    decltype(&rocblas_create_handle) create = blas_lib.get<decltype(&rocblas_create_handle)>("rocblas_create_handle");
    decltype(&rocblas_destroy_handle) destroy = blas_lib.get<decltype(&rocblas_destroy_handle)>("rocblas_destroy_handle");
    decltype(&rocsolver_sgetrf) getrf = lib.get<decltype(&rocsolver_sgetrf)>("rocsolver_sgetrf");
    decltype(&rocsolver_sgetrs) getrs = lib.get<decltype(&rocsolver_sgetrs)>("rocsolver_sgetrs");
};

Outcome solve_cpu() {
    System s;
    auto x = reference::solve(kSolveN, s.a, s.b);
    double residual = 0;
    for (int i = 0; i < kSolveN; ++i) {
        double r = -s.b[i];
        for (int j = 0; j < kSolveN; ++j) r += static_cast<double>(s.a[static_cast<size_t>(j) * kSolveN + i]) * x[j];
        residual = std::max(residual, std::fabs(r));
    }
    if (residual > 1e-9) return {"fail", format("the CPU solution leaves a residual of %.2e", residual)};
    std::string done = format("%gx%g system solved on the CPU, residual %.1e", kSolveN, kSolveN, residual);
    Solver so;
    if (!so.lib.loaded()) return unloadable(so.lib, done);
    if (!so.blas_lib.loaded()) return unloadable(so.blas_lib, done);
    if (!so.lib.missing().empty()) return missing(so.lib);
    return {"cpu-only", done + "; librocsolver.so.0 loads"};
}

Outcome solve_gpu() {
    Solver so;
    if (!so.lib.loaded()) return unloadable(so.lib);
    if (!so.blas_lib.loaded()) return unloadable(so.blas_lib);
    if (!so.lib.missing().empty()) return missing(so.lib);
    if (!so.blas_lib.missing().empty()) return missing(so.blas_lib);
    System s;
    Device<float> a(s.a), b(s.b);
    Device<rocblas_int> ipiv(kSolveN), info(1);
    if (a.error || b.error || ipiv.error || info.error) return {"error", "hipMalloc/hipMemcpy failed"};
    rocblas_handle h = nullptr;
    if (so.create(&h) != rocblas_status_success) return {"error", "rocblas_create_handle failed"};
    rocblas_status st = so.getrf(h, kSolveN, kSolveN, a.p, kSolveN, ipiv.p, info.p);
    if (st == rocblas_status_success) st = so.getrs(h, rocblas_operation_none, kSolveN, 1, a.p, kSolveN, ipiv.p, b.p, kSolveN);
    hipError_t e = hipDeviceSynchronize();
    so.destroy(h);
    if (st != rocblas_status_success) return {"error", format("rocsolver_sgetrf/sgetrs: status %g", st)};
    auto got = b.read(e);
    if (e != hipSuccess) return {"error", std::string("hipMemcpy: ") + hipGetErrorString(e)};
    double err = relative_error(got, reference::solve(kSolveN, s.a, s.b));
    return {err < 1e-5 ? "pass" : "fail", format("%gx%g system, largest GPU/CPU difference %.2e of the largest value", kSolveN, kSolveN, err)};
}

// --- convolution (MIOpen) ---------------------------------------------------------------------

constexpr int kImage = 32, kFilter = 3;

struct Dnn {
    Library lib{"libMIOpen.so.1"};
    decltype(&miopenCreate) create = lib.get<decltype(&miopenCreate)>("miopenCreate");
    decltype(&miopenDestroy) destroy = lib.get<decltype(&miopenDestroy)>("miopenDestroy");
    decltype(&miopenCreateTensorDescriptor) tensor_create =
        lib.get<decltype(&miopenCreateTensorDescriptor)>("miopenCreateTensorDescriptor");
    decltype(&miopenSet4dTensorDescriptor) tensor_set =
        lib.get<decltype(&miopenSet4dTensorDescriptor)>("miopenSet4dTensorDescriptor");
    decltype(&miopenDestroyTensorDescriptor) tensor_destroy =
        lib.get<decltype(&miopenDestroyTensorDescriptor)>("miopenDestroyTensorDescriptor");
    decltype(&miopenCreateConvolutionDescriptor) conv_create =
        lib.get<decltype(&miopenCreateConvolutionDescriptor)>("miopenCreateConvolutionDescriptor");
    decltype(&miopenInitConvolutionDescriptor) conv_init =
        lib.get<decltype(&miopenInitConvolutionDescriptor)>("miopenInitConvolutionDescriptor");
    decltype(&miopenDestroyConvolutionDescriptor) conv_destroy =
        lib.get<decltype(&miopenDestroyConvolutionDescriptor)>("miopenDestroyConvolutionDescriptor");
    decltype(&miopenConvolutionForwardGetWorkSpaceSize) workspace =
        lib.get<decltype(&miopenConvolutionForwardGetWorkSpaceSize)>("miopenConvolutionForwardGetWorkSpaceSize");
    decltype(&miopenFindConvolutionForwardAlgorithm) find =
        lib.get<decltype(&miopenFindConvolutionForwardAlgorithm)>("miopenFindConvolutionForwardAlgorithm");
    decltype(&miopenConvolutionForward) forward = lib.get<decltype(&miopenConvolutionForward)>("miopenConvolutionForward");
};

Outcome conv_cpu() {
    auto image = reference::integers(kImage * kImage, 4, 9), filter = reference::integers(kFilter * kFilter, 2, 10);
    auto out = reference::conv2d(kImage, kFilter, image, filter);
    // A filter that is one 1 at its centre copies the image's inner part.
    std::vector<float> centre(kFilter * kFilter, 0.0f);
    centre[kFilter * kFilter / 2] = 1.0f;
    auto copy = reference::conv2d(kImage, kFilter, image, centre);
    const int o = kImage - kFilter + 1;
    for (int y = 0; y < o; ++y) {
        for (int x = 0; x < o; ++x) {
            if (copy[y * o + x] != image[(y + 1) * kImage + x + 1]) return {"fail", "the CPU convolution is misaligned"};
        }
    }
    std::string done = format("%gx%g image, 3x3 filter, %g outputs on the CPU, checked", kImage, kImage,
                              static_cast<double>(out.size()));
    Dnn dnn;
    if (!dnn.lib.loaded()) return unloadable(dnn.lib, done);
    if (!dnn.lib.missing().empty()) return missing(dnn.lib);
    return {"cpu-only", done + "; libMIOpen.so.1 loads"};
}

Outcome conv_gpu() {
    Dnn dnn;
    if (!dnn.lib.loaded()) return unloadable(dnn.lib);
    if (!dnn.lib.missing().empty()) return missing(dnn.lib);
    auto image = reference::integers(kImage * kImage, 4, 9), filter = reference::integers(kFilter * kFilter, 2, 10);
    const int o = kImage - kFilter + 1;
    Device<float> x(image), w(filter), y(static_cast<size_t>(o) * o);
    if (x.error || w.error || y.error) return {"error", "hipMalloc/hipMemcpy failed"};
    miopenHandle_t h = nullptr;
    if (dnn.create(&h) != miopenStatusSuccess) return {"error", "miopenCreate failed"};
    miopenTensorDescriptor_t xd = nullptr, wd = nullptr, yd = nullptr;
    miopenConvolutionDescriptor_t cd = nullptr;
    dnn.tensor_create(&xd);
    dnn.tensor_create(&wd);
    dnn.tensor_create(&yd);
    dnn.conv_create(&cd);
    dnn.tensor_set(xd, miopenFloat, 1, 1, kImage, kImage);
    dnn.tensor_set(wd, miopenFloat, 1, 1, kFilter, kFilter);
    dnn.tensor_set(yd, miopenFloat, 1, 1, o, o);
    dnn.conv_init(cd, miopenConvolution, 0, 0, 1, 1, 1, 1);
    size_t work = 0;
    miopenStatus_t s = dnn.workspace(h, wd, xd, cd, yd, &work);
    Device<char> buffer(std::max<size_t>(work, 1));
    miopenConvAlgoPerf_t perf{};
    int found = 0;
    if (s == miopenStatusSuccess) {
        s = dnn.find(h, xd, x.p, wd, w.p, cd, yd, y.p, 1, &found, &perf, buffer.p, work, false);
    }
    const float one = 1.0f, zero = 0.0f;
    if (s == miopenStatusSuccess && found > 0) {
        s = dnn.forward(h, &one, xd, x.p, wd, w.p, cd, perf.fwd_algo, &zero, yd, y.p, buffer.p, work);
    }
    hipError_t e = hipDeviceSynchronize();
    dnn.conv_destroy(cd);
    dnn.tensor_destroy(xd);
    dnn.tensor_destroy(wd);
    dnn.tensor_destroy(yd);
    dnn.destroy(h);
    if (s != miopenStatusSuccess || found == 0) return {"error", format("MIOpen forward convolution: status %g, %g algorithms found", s, found)};
    auto got = y.read(e);
    if (e != hipSuccess) return {"error", std::string("hipMemcpy: ") + hipGetErrorString(e)};
    double err = relative_error(got, reference::conv2d(kImage, kFilter, image, filter));
    // A direct or GEMM algorithm is exact on these integers; Winograd and FFT ones round.
    return {err < 1e-5 ? "pass" : "fail",
            format("%gx%g image, algorithm %g, largest GPU/CPU difference %.2e of the largest value", kImage, kImage, perf.fwd_algo) +
                format(" (%.2e)", err)};
}

// --- a 50-step training loop (rocBLAS and kernels of our own) ---------------------------------

constexpr int kSteps = 50;
constexpr float kRate = 0.05f;

__global__ void relu(const float* h, float* a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) a[i] = h[i] > 0 ? h[i] : 0;
}

__global__ void residual(const float* p, const float* y, float* dp, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dp[i] = 2.0f * (p[i] - y[i]) / static_cast<float>(n);
}

__global__ void relu_grad(const float* h, float* da, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n && h[i] <= 0) da[i] = 0;
}

__global__ void step(float* w, const float* dw, float rate, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) w[i] -= rate * dw[i];
}

int blocks(int n) { return (n + 255) / 256; }

Outcome train_cpu() {
    auto losses = reference::train(reference::mlp_problem(), kSteps, kRate);
    if (!(losses.back() < 0.5f * losses.front())) {
        return {"fail", format("the CPU loop does not learn: loss %.4g after %g steps, %.4g at first", losses.back(), kSteps, losses.front())};
    }
    std::string done = format("%g steps on the CPU, loss %.4g to %.4g", kSteps, losses.front(), losses.back());
    Blas blas;
    if (!blas.lib.loaded()) return unloadable(blas.lib, done);
    if (!blas.lib.missing().empty()) return missing(blas.lib);
    return {"cpu-only", done + "; librocblas.so.4 loads"};
}

Outcome train_gpu() {
    Blas blas;
    if (!blas.lib.loaded()) return unloadable(blas.lib);
    if (!blas.lib.missing().empty()) return missing(blas.lib);
    reference::Mlp m = reference::mlp_problem();
    const int in = m.in, hid = m.hidden, out = m.out, bat = m.batch;
    Device<float> w1(m.w1), w2(m.w2), x(m.x), y(m.y);
    Device<float> h(static_cast<size_t>(hid) * bat), a(static_cast<size_t>(hid) * bat), p(static_cast<size_t>(out) * bat),
        dp(static_cast<size_t>(out) * bat), da(static_cast<size_t>(hid) * bat), dw1(m.w1.size()), dw2(m.w2.size());
    for (hipError_t e : {w1.error, w2.error, x.error, y.error, h.error, a.error, p.error, dp.error, da.error, dw1.error, dw2.error}) {
        if (e != hipSuccess) return {"error", std::string("hipMalloc/hipMemcpy: ") + hipGetErrorString(e)};
    }
    rocblas_handle hb = nullptr;
    if (blas.create(&hb) != rocblas_status_success) return {"error", "rocblas_create_handle failed"};
    const float one = 1.0f, zero = 0.0f;
    const auto N = rocblas_operation_none, T = rocblas_operation_transpose;
    std::vector<float> losses;
    rocblas_status s = rocblas_status_success;
    hipError_t e = hipSuccess;
    for (int i = 0; i < kSteps && s == rocblas_status_success && e == hipSuccess; ++i) {
        // Forward: H = W1·X, A = relu(H), P = W2·A.
        s = blas.sgemm(hb, N, N, hid, bat, in, &one, w1.p, hid, x.p, in, &zero, h.p, hid);
        relu<<<blocks(hid * bat), 256>>>(h.p, a.p, hid * bat);
        if (s == rocblas_status_success) s = blas.sgemm(hb, N, N, out, bat, hid, &one, w2.p, out, a.p, hid, &zero, p.p, out);
        auto pred = p.read(e);
        float loss = 0;
        for (size_t j = 0; j < pred.size(); ++j) loss += (pred[j] - m.y[j]) * (pred[j] - m.y[j]);
        losses.push_back(loss / static_cast<float>(pred.size()));
        // Backward: dP, dW2 = dP·Aᵀ, dA = W2ᵀ·dP masked by H > 0, dW1 = dA·Xᵀ; then the step.
        residual<<<blocks(out * bat), 256>>>(p.p, y.p, dp.p, out * bat);
        if (s == rocblas_status_success) s = blas.sgemm(hb, N, T, out, hid, bat, &one, dp.p, out, a.p, hid, &zero, dw2.p, out);
        if (s == rocblas_status_success) s = blas.sgemm(hb, T, N, hid, bat, out, &one, w2.p, out, dp.p, out, &zero, da.p, hid);
        relu_grad<<<blocks(hid * bat), 256>>>(h.p, da.p, hid * bat);
        if (s == rocblas_status_success) s = blas.sgemm(hb, N, T, hid, in, bat, &one, da.p, hid, x.p, in, &zero, dw1.p, hid);
        step<<<blocks(hid * in), 256>>>(w1.p, dw1.p, kRate, hid * in);
        step<<<blocks(out * hid), 256>>>(w2.p, dw2.p, kRate, out * hid);
        if (e == hipSuccess) e = hipGetLastError();
    }
    if (e == hipSuccess) e = hipDeviceSynchronize();
    blas.destroy(hb);
    if (s != rocblas_status_success) return {"error", format("rocblas_sgemm in the loop: status %g", s)};
    if (e != hipSuccess) return {"error", std::string("the training kernels: ") + hipGetErrorString(e)};
    auto want = reference::train(reference::mlp_problem(), kSteps, kRate);
    double err = relative_error(losses, want);
    return {err < 1e-3 ? "pass" : "fail",
            format("%g steps, loss %.4g to %.4g; ", kSteps, losses.front(), losses.back()) +
                format("largest GPU/CPU loss difference %.2e of the largest loss", err)};
}

}  // namespace

std::vector<Check> stack_checks() {
    return {
        {"matmul", "rocBLAS", matmul_cpu, matmul_gpu},     {"fft", "rocFFT", fft_cpu, fft_gpu},
        {"sparse", "rocSPARSE", sparse_cpu, sparse_gpu},   {"solve", "rocSOLVER", solve_cpu, solve_gpu},
        {"conv", "MIOpen", conv_cpu, conv_gpu},            {"train", "rocBLAS", train_cpu, train_gpu},
    };
}
