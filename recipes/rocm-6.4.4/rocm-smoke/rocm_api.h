// The declarations rocm-smoke calls through dlsym, as the libraries' public C headers of ROCm 6.4
// declare them (rocblas-types.h and rocblas-functions.h, rocsparse-types.h and
// rocsparse-functions.h, rocfft.h, rocsolver-functions.h, miopen.h). Only what the checks use;
// the enum values are the headers' own, which the libraries' C ABI keeps.
#pragma once

#include <cstddef>
#include <cstdint>

extern "C" {

// --- rocBLAS (librocblas.so.4) ---
typedef struct _rocblas_handle* rocblas_handle;
typedef int32_t rocblas_int;
typedef enum rocblas_status_ { rocblas_status_success = 0 } rocblas_status;
typedef enum rocblas_operation_ {
    rocblas_operation_none = 111,
    rocblas_operation_transpose = 112,
} rocblas_operation;
rocblas_status rocblas_create_handle(rocblas_handle* handle);
rocblas_status rocblas_destroy_handle(rocblas_handle handle);
rocblas_status rocblas_sgemm(rocblas_handle handle, rocblas_operation transA, rocblas_operation transB, rocblas_int m,
                             rocblas_int n, rocblas_int k, const float* alpha, const float* A, rocblas_int lda,
                             const float* B, rocblas_int ldb, const float* beta, float* C, rocblas_int ldc);

// --- rocSOLVER (librocsolver.so.0), on rocBLAS's handle ---
rocblas_status rocsolver_sgetrf(rocblas_handle handle, const rocblas_int m, const rocblas_int n, float* A,
                                const rocblas_int lda, rocblas_int* ipiv, rocblas_int* info);
rocblas_status rocsolver_sgetrs(rocblas_handle handle, const rocblas_operation trans, const rocblas_int n,
                                const rocblas_int nrhs, float* A, const rocblas_int lda, const rocblas_int* ipiv,
                                float* B, const rocblas_int ldb);

// --- rocSPARSE (librocsparse.so.1) ---
typedef struct _rocsparse_handle* rocsparse_handle;
typedef struct _rocsparse_mat_descr* rocsparse_mat_descr;
typedef struct _rocsparse_mat_info* rocsparse_mat_info;
typedef int32_t rocsparse_int;
typedef enum rocsparse_status_ { rocsparse_status_success = 0 } rocsparse_status;
typedef enum rocsparse_operation_ { rocsparse_operation_none = 111 } rocsparse_operation;
rocsparse_status rocsparse_create_handle(rocsparse_handle* handle);
rocsparse_status rocsparse_destroy_handle(rocsparse_handle handle);
rocsparse_status rocsparse_create_mat_descr(rocsparse_mat_descr* descr);
rocsparse_status rocsparse_destroy_mat_descr(rocsparse_mat_descr descr);
rocsparse_status rocsparse_scsrmv(rocsparse_handle handle, rocsparse_operation trans, rocsparse_int m, rocsparse_int n,
                                  rocsparse_int nnz, const float* alpha, const rocsparse_mat_descr descr,
                                  const float* csr_val, const rocsparse_int* csr_row_ptr,
                                  const rocsparse_int* csr_col_ind, rocsparse_mat_info info, const float* x,
                                  const float* beta, float* y);

// --- rocFFT (librocfft.so.0) ---
typedef struct rocfft_plan_t* rocfft_plan;
typedef struct rocfft_plan_description_t* rocfft_plan_description;
typedef struct rocfft_execution_info_t* rocfft_execution_info;
typedef enum rocfft_status_e { rocfft_status_success = 0 } rocfft_status;
typedef enum rocfft_transform_type_e { rocfft_transform_type_complex_forward = 0 } rocfft_transform_type;
typedef enum rocfft_precision_e { rocfft_precision_single = 0 } rocfft_precision;
typedef enum rocfft_result_placement_e { rocfft_placement_inplace = 0 } rocfft_result_placement;
rocfft_status rocfft_setup();
rocfft_status rocfft_plan_create(rocfft_plan* plan, rocfft_result_placement placement,
                                 rocfft_transform_type transform_type, rocfft_precision precision, size_t dimensions,
                                 const size_t* lengths, size_t number_of_transforms,
                                 const rocfft_plan_description description);
rocfft_status rocfft_plan_get_work_buffer_size(const rocfft_plan plan, size_t* size_in_bytes);
rocfft_status rocfft_execution_info_create(rocfft_execution_info* info);
rocfft_status rocfft_execution_info_set_work_buffer(rocfft_execution_info info, void* work_buffer,
                                                    const size_t size_in_bytes);
rocfft_status rocfft_execute(const rocfft_plan plan, void* in_buffer[], void* out_buffer[], rocfft_execution_info info);
rocfft_status rocfft_execution_info_destroy(rocfft_execution_info info);
rocfft_status rocfft_plan_destroy(rocfft_plan plan);

// --- MIOpen (libMIOpen.so.1) ---
typedef struct miopenHandle* miopenHandle_t;
typedef struct miopenTensorDescriptor* miopenTensorDescriptor_t;
typedef struct miopenConvolutionDescriptor* miopenConvolutionDescriptor_t;
typedef enum { miopenStatusSuccess = 0 } miopenStatus_t;
typedef enum { miopenHalf = 0, miopenFloat = 1 } miopenDataType_t;
typedef enum { miopenConvolution = 0 } miopenConvolutionMode_t;
typedef enum { miopenConvolutionFwdAlgoGEMM = 0 } miopenConvFwdAlgorithm_t;
typedef struct {
    union {
        miopenConvFwdAlgorithm_t fwd_algo;
        int bwd_weights_algo;
        int bwd_data_algo;
    };
    float time;
    size_t memory;
} miopenConvAlgoPerf_t;
miopenStatus_t miopenCreate(miopenHandle_t* handle);
miopenStatus_t miopenDestroy(miopenHandle_t handle);
miopenStatus_t miopenCreateTensorDescriptor(miopenTensorDescriptor_t* tensorDesc);
miopenStatus_t miopenSet4dTensorDescriptor(miopenTensorDescriptor_t tensorDesc, miopenDataType_t dataType, int n, int c,
                                           int h, int w);
miopenStatus_t miopenDestroyTensorDescriptor(miopenTensorDescriptor_t tensorDesc);
miopenStatus_t miopenCreateConvolutionDescriptor(miopenConvolutionDescriptor_t* convDesc);
miopenStatus_t miopenInitConvolutionDescriptor(miopenConvolutionDescriptor_t convDesc, miopenConvolutionMode_t c_mode,
                                               int pad_h, int pad_w, int stride_h, int stride_w, int dilation_h,
                                               int dilation_w);
miopenStatus_t miopenDestroyConvolutionDescriptor(miopenConvolutionDescriptor_t convDesc);
miopenStatus_t miopenConvolutionForwardGetWorkSpaceSize(miopenHandle_t handle, const miopenTensorDescriptor_t wDesc,
                                                        const miopenTensorDescriptor_t xDesc,
                                                        const miopenConvolutionDescriptor_t convDesc,
                                                        const miopenTensorDescriptor_t yDesc, size_t* workSpaceSize);
miopenStatus_t miopenFindConvolutionForwardAlgorithm(
    miopenHandle_t handle, const miopenTensorDescriptor_t xDesc, const void* x, const miopenTensorDescriptor_t wDesc,
    const void* w, const miopenConvolutionDescriptor_t convDesc, const miopenTensorDescriptor_t yDesc, void* y,
    const int requestAlgoCount, int* returnedAlgoCount, miopenConvAlgoPerf_t* perfResults, void* workSpace,
    size_t workSpaceSize, bool exhaustiveSearch);
miopenStatus_t miopenConvolutionForward(miopenHandle_t handle, const void* alpha, const miopenTensorDescriptor_t xDesc,
                                        const void* x, const miopenTensorDescriptor_t wDesc, const void* w,
                                        const miopenConvolutionDescriptor_t convDesc, miopenConvFwdAlgorithm_t algo,
                                        const void* beta, const miopenTensorDescriptor_t yDesc, void* y,
                                        void* workSpace, size_t workSpaceSize);
}
