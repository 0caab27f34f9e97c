/*
 * fakedevice.c - a fake HIP device for compile-only replays of MIOpen, without a GPU.
 *
 * Copyright (c) 2026 the rocforge authors. MIT License: permission is hereby granted, free of
 * charge, to any person obtaining a copy of this file, to deal in it without restriction,
 * including the rights to use, copy, modify, merge, publish, distribute, sublicense and/or sell
 * copies, provided this notice is kept. THE FILE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND.
 *
 * What it is: an LD_PRELOAD library, written for rocforge from scratch against the public HIP
 * headers, that answers the HIP runtime calls libMIOpen, librocblas, librocrand and MIOpenDriver
 * make (the list is `nm -D --undefined-only` of those four files) with one fake device:
 *   - hipGetDevice/hipGetDeviceCount/hipGetDeviceProperties, hipDeviceGetAttribute report one
 *     device whose gcnArchName is $FAKEDEVICE_ARCH (e.g. gfx90c) with $FAKEDEVICE_CU compute
 *     units and $FAKEDEVICE_MEM_MB of memory;
 *   - hipMalloc & co. are backed by host memory (anonymous mmap, so large unused buffers cost no
 *     RAM); hipMemcpy and hipMemset calls act on that host memory;
 *   - streams and events are fake handles, every synchronisation returns at once;
 *   - hipModuleLoad, hipModuleLoadData and hipModuleGetFunction return fake handles, and hipModuleLoadData checks that
 *     the code object it is given is an AMDGPU ELF for the fake device's processor (recorded);
 *   - kernel launches (hipModuleLaunchKernel, hipExtModuleLaunchKernel, hipLaunchKernel, ...)
 *     do nothing (counted), and the fat-binary registration of rocBLAS/rocRAND's embedded
 *     kernels is accepted and ignored.
 * Why: MIOpen compiles its kernels (OpenCL and assembly through comgr, HIP through hipRTC) for
 * the device it finds, when a solver first needs them. MIOpen's HIP-backend Handle needs a
 * device to exist (src/hip/handlehip.cpp get_device_id, hipStreamCreate) and MIOpenDriver needs
 * hipMalloc, but with MIOPEN_DEVICE_ARCH set and MIOPEN_DEBUG_COMPILE_ONLY=1 nothing is ever run.
 * This library lets the built MIOpen run its own find/compile path for gfx90c and gfx902 on a
 * machine without any GPU. Nothing here executes GPU code and nothing here pretends to: results
 * of any "kernel" are whatever the host buffers held before.
 *
 * hipRTC: MIOpen does not pass --offload-arch to hiprtcCompileProgram (it strips -mcpu=, see
 * src/comgr.cpp BuildHip), so hipRTC asks the HIP runtime for the device's gcnArchName (clr
 * hiprtcInternal.cpp RTCProgram::findIsa). With Debian's libhiprtc 6.4 that question reaches this
 * file through libamdhip64's own exported-symbol calls, which LD_PRELOAD interposes: a replay with
 * FAKEDEVICE_ARCH=gfx902:xnack- and MIOPEN_DEVICE_ARCH=gfx90c:xnack- produced gfx902 HIP code
 * objects. replay.sh also puts this file, named libamdhip64.so, first on LD_LIBRARY_PATH, for a
 * hipRTC that dlopen()s that name and dlsym()s on its own handle. Such queries are counted.
 *
 * Environment: FAKEDEVICE_ARCH (default gfx90c), FAKEDEVICE_CU (8), FAKEDEVICE_MEM_MB (4096),
 * FAKEDEVICE_LOG (file; default stderr, "0" for none), FAKEDEVICE_REPORT (file the exit summary
 * is appended to, one JSON object per process).
 */
#define _GNU_SOURCE
#define __HIP_PLATFORM_AMD__ 1
#include <hip/hip_runtime_api.h>
#include <hip/hip_deprecated.h>

#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#undef hipGetDeviceProperties
#undef hipDeviceProp_t

#define EXPORT __attribute__((visibility("default")))

/* ---------------------------------------------------------------- configuration, logging */

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static char g_arch[64] = "gfx90c";
static int g_cu = 8;
static size_t g_mem = (size_t)4096 << 20;
static FILE* g_log;
static int g_inited;

/* counters for the exit summary */
static unsigned long n_launch, n_modload, n_modload_ok_mach, n_modload_bad, n_alloc, n_hiprtc_isa;
static char bad_mach_seen[256];

static void fd_init(void)
{
    if(__atomic_load_n(&g_inited, __ATOMIC_ACQUIRE))
        return;
    pthread_mutex_lock(&g_lock);
    if(!g_inited)
    {
        const char* a = getenv("FAKEDEVICE_ARCH");
        if(a && *a)
            snprintf(g_arch, sizeof g_arch, "%s", a);
        const char* c = getenv("FAKEDEVICE_CU");
        if(c && atoi(c) > 0)
            g_cu = atoi(c);
        const char* m = getenv("FAKEDEVICE_MEM_MB");
        if(m && atol(m) > 0)
            g_mem = (size_t)atol(m) << 20;
        const char* l = getenv("FAKEDEVICE_LOG");
        if(l && strcmp(l, "0") == 0)
            g_log = NULL;
        else if(l && *l)
            g_log = fopen(l, "a");
        else
            g_log = stderr;
        if(g_log && g_log != stderr)
            setvbuf(g_log, NULL, _IOLBF, 0);
        __atomic_store_n(&g_inited, 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&g_lock);
}

static void logf_(const char* fmt, ...)
{
    fd_init();
    if(!g_log)
        return;
    va_list ap;
    va_start(ap, fmt);
    flockfile(g_log);
    fprintf(g_log, "fakedevice[%d]: ", (int)getpid());
    vfprintf(g_log, fmt, ap);
    fputc('\n', g_log);
    funlockfile(g_log);
    va_end(ap);
}

/* Log the first call of each entry point, and who called it (object file name). */
#define MAX_SEEN 128
static const char* seen_names[MAX_SEEN];
static int n_seen;
static void first_call(const char* name, void* ret_addr)
{
    pthread_mutex_lock(&g_lock);
    for(int i = 0; i < n_seen; i++)
        if(seen_names[i] == name)
        {
            pthread_mutex_unlock(&g_lock);
            return;
        }
    if(n_seen < MAX_SEEN)
        seen_names[n_seen++] = name;
    pthread_mutex_unlock(&g_lock);
    Dl_info di;
    const char* obj = "?";
    if(ret_addr && dladdr(ret_addr, &di) && di.dli_fname)
        obj = di.dli_fname;
    logf_("first call: %s (from %s)", name, obj);
}
#define TRACE() first_call(__func__, __builtin_return_address(0))

/* hipRTC asks the runtime for the device's ISA when it is given no --offload-arch; with Debian's
 * libhiprtc the question reaches this file through libamdhip64's own exported-symbol calls
 * (interposed by LD_PRELOAD), so count callers in either library. */
static int called_from_hiprtc(void* ret_addr)
{
    Dl_info di;
    return ret_addr && dladdr(ret_addr, &di) && di.dli_fname &&
           (strstr(di.dli_fname, "hiprtc") || strstr(di.dli_fname, "libamdhip64"));
}

/* ---------------------------------------------------------------- host-backed "device" memory */

struct alloc
{
    void* p;
    size_t n;
};
static struct alloc* allocs;
static size_t n_allocs, cap_allocs;

static void* fd_alloc(size_t n)
{
    size_t len = n ? n : 1;
    void* p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    if(p == MAP_FAILED)
        return NULL;
    pthread_mutex_lock(&g_lock);
    if(n_allocs == cap_allocs)
    {
        cap_allocs = cap_allocs ? 2 * cap_allocs : 256;
        allocs     = realloc(allocs, cap_allocs * sizeof *allocs);
    }
    allocs[n_allocs].p = p;
    allocs[n_allocs].n = len;
    n_allocs++;
    n_alloc++;
    pthread_mutex_unlock(&g_lock);
    return p;
}

/* returns the size of the allocation starting at p (0 if none); removes it if `take` */
static size_t fd_find(const void* p, int take, void** base)
{
    size_t n = 0;
    pthread_mutex_lock(&g_lock);
    for(size_t i = 0; i < n_allocs; i++)
    {
        char* b = allocs[i].p;
        if((const char*)p >= b && (const char*)p < b + allocs[i].n)
        {
            n = allocs[i].n - (size_t)((const char*)p - b);
            if(base)
                *base = b;
            if(take && p == b)
            {
                n                  = allocs[i].n;
                allocs[i]          = allocs[n_allocs - 1];
                n_allocs--;
            }
            break;
        }
    }
    pthread_mutex_unlock(&g_lock);
    return n;
}

static hipError_t fd_free(void* p)
{
    if(!p)
        return hipSuccess;
    size_t n = fd_find(p, 1, NULL);
    if(!n)
        return hipErrorInvalidValue;
    munmap(p, n);
    return hipSuccess;
}

EXPORT hipError_t hipMalloc(void** p, size_t n)
{
    TRACE();
    if(!p)
        return hipErrorInvalidValue;
    *p = fd_alloc(n);
    return *p ? hipSuccess : hipErrorOutOfMemory;
}
EXPORT hipError_t hipExtMallocWithFlags(void** p, size_t n, unsigned int f)
{
    (void)f;
    TRACE();
    return hipMalloc(p, n);
}
EXPORT hipError_t hipMallocManaged(void** p, size_t n, unsigned int f)
{
    (void)f;
    TRACE();
    return hipMalloc(p, n);
}
EXPORT hipError_t hipHostMalloc(void** p, size_t n, unsigned int f)
{
    (void)f;
    TRACE();
    return hipMalloc(p, n);
}
EXPORT hipError_t hipMallocAsync(void** p, size_t n, hipStream_t s)
{
    (void)s;
    TRACE();
    return hipMalloc(p, n);
}
EXPORT hipError_t hipFree(void* p)
{
    TRACE();
    return fd_free(p);
}
EXPORT hipError_t hipHostFree(void* p)
{
    TRACE();
    return fd_free(p);
}
EXPORT hipError_t hipFreeAsync(void* p, hipStream_t s)
{
    (void)s;
    TRACE();
    return fd_free(p);
}
EXPORT hipError_t hipMemPtrGetInfo(void* p, size_t* n)
{
    TRACE();
    size_t k = fd_find(p, 0, NULL);
    if(n)
        *n = k;
    return k ? hipSuccess : hipErrorInvalidValue;
}
EXPORT hipError_t hipPointerGetAttributes(hipPointerAttribute_t* a, const void* p)
{
    TRACE();
    if(!a)
        return hipErrorInvalidValue;
    memset(a, 0, sizeof *a);
    a->type          = fd_find(p, 0, NULL) ? hipMemoryTypeDevice : hipMemoryTypeHost;
    a->device        = 0;
    a->devicePointer = (void*)p;
    a->hostPointer   = (void*)p;
    return hipSuccess;
}
EXPORT hipError_t hipDeviceGetDefaultMemPool(hipMemPool_t* pool, int dev)
{
    (void)dev;
    TRACE();
    static int dummy;
    *pool = (hipMemPool_t)&dummy;
    return hipSuccess;
}
EXPORT hipError_t hipMemPoolTrimTo(hipMemPool_t pool, size_t keep)
{
    (void)pool;
    (void)keep;
    TRACE();
    return hipSuccess;
}
EXPORT hipError_t hipMemGetInfo(size_t* free_, size_t* total)
{
    TRACE();
    fd_init();
    if(free_)
        *free_ = g_mem - g_mem / 8;
    if(total)
        *total = g_mem;
    return hipSuccess;
}
EXPORT hipError_t hipDeviceTotalMem(size_t* total, hipDevice_t dev)
{
    (void)dev;
    TRACE();
    fd_init();
    *total = g_mem;
    return hipSuccess;
}

EXPORT hipError_t hipMemcpy(void* d, const void* s, size_t n, hipMemcpyKind k)
{
    (void)k;
    TRACE();
    if(n && d != s)
        memmove(d, s, n);
    return hipSuccess;
}
EXPORT hipError_t hipMemcpyWithStream(void* d, const void* s, size_t n, hipMemcpyKind k,
                                      hipStream_t st)
{
    (void)st;
    TRACE();
    return hipMemcpy(d, s, n, k);
}
EXPORT hipError_t hipMemcpyAsync(void* d, const void* s, size_t n, hipMemcpyKind k, hipStream_t st)
{
    (void)st;
    TRACE();
    return hipMemcpy(d, s, n, k);
}
EXPORT hipError_t hipMemcpyHtoD(hipDeviceptr_t d, void* s, size_t n)
{
    TRACE();
    return hipMemcpy(d, s, n, hipMemcpyHostToDevice);
}
EXPORT hipError_t hipMemcpyDtoH(void* d, hipDeviceptr_t s, size_t n)
{
    TRACE();
    return hipMemcpy(d, s, n, hipMemcpyDeviceToHost);
}
EXPORT hipError_t hipMemcpyDtoD(hipDeviceptr_t d, hipDeviceptr_t s, size_t n)
{
    TRACE();
    return hipMemcpy(d, s, n, hipMemcpyDeviceToDevice);
}
EXPORT hipError_t hipMemcpy2D(void* d, size_t dp, const void* s, size_t sp, size_t w, size_t h,
                              hipMemcpyKind k)
{
    (void)k;
    TRACE();
    for(size_t r = 0; r < h; r++)
        memmove((char*)d + r * dp, (const char*)s + r * sp, w);
    return hipSuccess;
}
EXPORT hipError_t hipMemcpy2DAsync(void* d, size_t dp, const void* s, size_t sp, size_t w, size_t h,
                                   hipMemcpyKind k, hipStream_t st)
{
    (void)st;
    TRACE();
    return hipMemcpy2D(d, dp, s, sp, w, h, k);
}
EXPORT hipError_t hipMemset(void* d, int v, size_t n)
{
    TRACE();
    memset(d, v, n);
    return hipSuccess;
}
EXPORT hipError_t hipMemsetAsync(void* d, int v, size_t n, hipStream_t st)
{
    (void)st;
    TRACE();
    memset(d, v, n);
    return hipSuccess;
}
EXPORT hipError_t hipMemsetD32(hipDeviceptr_t d, int v, size_t n)
{
    TRACE();
    for(size_t i = 0; i < n; i++)
        ((int32_t*)d)[i] = v;
    return hipSuccess;
}
EXPORT hipError_t hipMemsetD32Async(hipDeviceptr_t d, int v, size_t n, hipStream_t st)
{
    (void)st;
    return hipMemsetD32(d, v, n);
}

/* ---------------------------------------------------------------- the device */

EXPORT hipError_t hipInit(unsigned int flags)
{
    (void)flags;
    TRACE();
    fd_init();
    return hipSuccess;
}
EXPORT hipError_t hipGetDeviceCount(int* n)
{
    TRACE();
    *n = 1;
    return hipSuccess;
}
EXPORT hipError_t hipGetDevice(int* d)
{
    TRACE();
    if(!d)
        return hipErrorInvalidValue;
    *d = 0;
    return hipSuccess;
}
EXPORT hipError_t hipSetDevice(int d)
{
    TRACE();
    return d == 0 ? hipSuccess : hipErrorInvalidDevice;
}
EXPORT int hipGetStreamDeviceId(hipStream_t s)
{
    (void)s;
    TRACE();
    return 0; /* returns the device id, not an error code */
}
EXPORT hipError_t hipRuntimeGetVersion(int* v)
{
    TRACE();
    *v = HIP_VERSION;
    return hipSuccess;
}
EXPORT hipError_t hipDriverGetVersion(int* v)
{
    TRACE();
    *v = HIP_VERSION;
    return hipSuccess;
}
EXPORT hipError_t hipDeviceSynchronize(void)
{
    TRACE();
    return hipSuccess;
}
EXPORT hipError_t hipDeviceGetName(char* name, int len, hipDevice_t dev)
{
    (void)dev;
    TRACE();
    snprintf(name, (size_t)len, "fakedevice %s (no GPU)", g_arch);
    return hipSuccess;
}

/* Properties of a Vega-class GCN5 APU; only the ones the libraries read matter. */
#define FILL_PROPS(p)                                                                             \
    do                                                                                            \
    {                                                                                             \
        fd_init();                                                                                \
        memset((p), 0, sizeof *(p));                                                              \
        snprintf((p)->name, sizeof (p)->name, "fakedevice %s (no GPU)", g_arch);                  \
        snprintf((p)->gcnArchName, sizeof (p)->gcnArchName, "%s", g_arch);                        \
        (p)->totalGlobalMem              = g_mem;                                                 \
        (p)->sharedMemPerBlock           = 65536;                                                 \
        (p)->regsPerBlock                = 65536;                                                 \
        (p)->warpSize                    = 64;                                                    \
        (p)->maxThreadsPerBlock          = 1024;                                                  \
        (p)->maxThreadsDim[0]            = 1024;                                                  \
        (p)->maxThreadsDim[1]            = 1024;                                                  \
        (p)->maxThreadsDim[2]            = 1024;                                                  \
        (p)->maxGridSize[0]              = INT_MAX;                                               \
        (p)->maxGridSize[1]              = 65536;                                                 \
        (p)->maxGridSize[2]              = 65536;                                                 \
        (p)->clockRate                   = 1800000;                                               \
        (p)->memoryClockRate             = 1600000;                                               \
        (p)->memoryBusWidth              = 128;                                                   \
        (p)->totalConstMem               = g_mem;                                                 \
        (p)->major                       = 9;                                                     \
        (p)->minor                       = 0;                                                     \
        (p)->multiProcessorCount         = g_cu;                                                  \
        (p)->l2CacheSize                 = 1048576;                                               \
        (p)->maxThreadsPerMultiProcessor = 2560;                                                  \
        (p)->computeMode                 = 0;                                                     \
        (p)->clockInstructionRate        = 1000000;                                               \
        (p)->concurrentKernels           = 1;                                                     \
        (p)->integrated                  = 1;                                                     \
        (p)->canMapHostMemory            = 1;                                                     \
        (p)->maxSharedMemoryPerMultiProcessor = 65536;                                            \
        (p)->isMultiGpuBoard             = 0;                                                     \
        (p)->cooperativeLaunch           = 1;                                                     \
        (p)->arch.hasGlobalInt32Atomics  = 1;                                                     \
        (p)->arch.hasSharedInt32Atomics  = 1;                                                     \
        (p)->arch.hasFloatAtomicAdd      = 1;                                                     \
        (p)->arch.hasGlobalInt64Atomics  = 1;                                                     \
        (p)->arch.hasSharedInt64Atomics  = 1;                                                     \
        (p)->arch.hasDoubles             = 1;                                                     \
        (p)->arch.hasWarpVote            = 1;                                                     \
        (p)->arch.hasWarpBallot          = 1;                                                     \
        (p)->arch.hasWarpShuffle         = 1;                                                     \
        (p)->arch.hasFunnelShift         = 1;                                                     \
        (p)->arch.hasThreadFenceSystem   = 1;                                                     \
        (p)->arch.hasSyncThreadsExt      = 1;                                                     \
        (p)->arch.has3dGrid              = 1;                                                     \
        (p)->arch.hasDynamicParallelism  = 0;                                                     \
    } while(0)

EXPORT hipError_t hipGetDevicePropertiesR0600(hipDeviceProp_tR0600* p, int d)
{
    void* ra = __builtin_return_address(0);
    first_call(__func__, ra);
    if(!p || d != 0)
        return hipErrorInvalidValue;
    FILL_PROPS(p);
    p->warpSize = 64;
    if(called_from_hiprtc(ra))
    {
        __atomic_add_fetch(&n_hiprtc_isa, 1, __ATOMIC_RELAXED);
        logf_("hipRTC asked the device for its ISA: answered %s", g_arch);
    }
    return hipSuccess;
}
/* The pre-6.0 entry point (struct layout hipDeviceProp_tR0000). */
EXPORT hipError_t hipGetDevicePropertiesR0000(hipDeviceProp_tR0000* p, int d)
{
    void* ra = __builtin_return_address(0);
    first_call(__func__, ra);
    if(!p || d != 0)
        return hipErrorInvalidValue;
    FILL_PROPS(p);
    p->gcnArch = 900;
    if(called_from_hiprtc(ra))
    {
        __atomic_add_fetch(&n_hiprtc_isa, 1, __ATOMIC_RELAXED);
        logf_("hipRTC asked the device for its ISA (R0000): answered %s", g_arch);
    }
    return hipSuccess;
}
EXPORT hipError_t hipGetDeviceProperties(hipDeviceProp_tR0000* p, int d)
{
    return hipGetDevicePropertiesR0000(p, d);
}

EXPORT hipError_t hipDeviceGetAttribute(int* v, hipDeviceAttribute_t a, int d)
{
    TRACE();
    if(!v || d != 0)
        return hipErrorInvalidValue;
    fd_init();
    switch(a)
    {
    case hipDeviceAttributeMultiprocessorCount: *v = g_cu; break;
    case hipDeviceAttributeMaxGridDimX: *v = INT_MAX; break;
    case hipDeviceAttributeMaxGridDimY:
    case hipDeviceAttributeMaxGridDimZ: *v = 65536; break;
    case hipDeviceAttributeMaxBlockDimX:
    case hipDeviceAttributeMaxBlockDimY:
    case hipDeviceAttributeMaxBlockDimZ:
    case hipDeviceAttributeMaxThreadsPerBlock: *v = 1024; break;
    case hipDeviceAttributeWarpSize: *v = 64; break;
    case hipDeviceAttributeMaxSharedMemoryPerBlock:
    case hipDeviceAttributeMaxSharedMemoryPerMultiprocessor: *v = 65536; break;
    case hipDeviceAttributeMaxRegistersPerBlock: *v = 65536; break;
    case hipDeviceAttributeClockRate: *v = 1800000; break;
    case hipDeviceAttributeMemoryClockRate: *v = 1600000; break;
    case hipDeviceAttributeMemoryBusWidth: *v = 128; break;
    case hipDeviceAttributeL2CacheSize: *v = 1048576; break;
    case hipDeviceAttributeComputeCapabilityMajor: *v = 9; break;
    case hipDeviceAttributeComputeCapabilityMinor: *v = 0; break;
    case hipDeviceAttributeMaxThreadsPerMultiProcessor: *v = 2560; break;
    case hipDeviceAttributeCooperativeLaunch: *v = 1; break;
    case hipDeviceAttributeIntegrated: *v = 1; break;
    case hipDeviceAttributeCanMapHostMemory: *v = 1; break;
    case hipDeviceAttributeConcurrentKernels: *v = 1; break;
    default:
        *v = 0;
        logf_("hipDeviceGetAttribute(%d): not modelled, answered 0", (int)a);
        break;
    }
    return hipSuccess;
}

/* ---------------------------------------------------------------- errors */

static const char* fd_errname(hipError_t e)
{
    switch(e)
    {
    case hipSuccess: return "hipSuccess";
    case hipErrorInvalidValue: return "hipErrorInvalidValue";
    case hipErrorOutOfMemory: return "hipErrorOutOfMemory";
    case hipErrorInvalidDevice: return "hipErrorInvalidDevice";
    case hipErrorNotReady: return "hipErrorNotReady";
    case hipErrorInvalidImage: return "hipErrorInvalidImage";
    case hipErrorNotSupported: return "hipErrorNotSupported";
    default: return "fakedevice: some HIP error";
    }
}
EXPORT const char* hipGetErrorString(hipError_t e) { return fd_errname(e); }
EXPORT const char* hipGetErrorName(hipError_t e) { return fd_errname(e); }
EXPORT hipError_t hipGetLastError(void) { return hipSuccess; }
EXPORT hipError_t hipPeekAtLastError(void) { return hipSuccess; }

/* ---------------------------------------------------------------- streams and events */

struct fake_obj
{
    char tag[8];
};
static struct fake_obj* fake_new(const char* tag)
{
    struct fake_obj* o = calloc(1, sizeof *o);
    snprintf(o->tag, sizeof o->tag, "%s", tag);
    return o;
}

EXPORT hipError_t hipStreamCreate(hipStream_t* s)
{
    TRACE();
    *s = (hipStream_t)fake_new("stream");
    return hipSuccess;
}
EXPORT hipError_t hipStreamCreateWithFlags(hipStream_t* s, unsigned int f)
{
    (void)f;
    TRACE();
    return hipStreamCreate(s);
}
EXPORT hipError_t hipStreamCreateWithPriority(hipStream_t* s, unsigned int f, int prio)
{
    (void)f;
    (void)prio;
    TRACE();
    return hipStreamCreate(s);
}
EXPORT hipError_t hipStreamDestroy(hipStream_t s)
{
    TRACE();
    free(s);
    return hipSuccess;
}
EXPORT hipError_t hipStreamSynchronize(hipStream_t s)
{
    (void)s;
    TRACE();
    return hipSuccess;
}
EXPORT hipError_t hipStreamQuery(hipStream_t s)
{
    (void)s;
    TRACE();
    return hipSuccess;
}
EXPORT hipError_t hipStreamWaitEvent(hipStream_t s, hipEvent_t e, unsigned int f)
{
    (void)s;
    (void)e;
    (void)f;
    TRACE();
    return hipSuccess;
}
EXPORT hipError_t hipStreamGetFlags(hipStream_t s, unsigned int* f)
{
    (void)s;
    TRACE();
    *f = 0;
    return hipSuccess;
}
EXPORT hipError_t hipStreamIsCapturing(hipStream_t s, hipStreamCaptureStatus* st)
{
    (void)s;
    TRACE();
    *st = hipStreamCaptureStatusNone;
    return hipSuccess;
}
EXPORT hipError_t hipLaunchHostFunc(hipStream_t s, hipHostFn_t fn, void* ud)
{
    (void)s;
    TRACE();
    fn(ud);
    return hipSuccess;
}
EXPORT hipError_t hipEventCreate(hipEvent_t* e)
{
    TRACE();
    *e = (hipEvent_t)fake_new("event");
    return hipSuccess;
}
EXPORT hipError_t hipEventCreateWithFlags(hipEvent_t* e, unsigned f)
{
    (void)f;
    TRACE();
    return hipEventCreate(e);
}
EXPORT hipError_t hipEventDestroy(hipEvent_t e)
{
    TRACE();
    free(e);
    return hipSuccess;
}
EXPORT hipError_t hipEventRecord(hipEvent_t e, hipStream_t s)
{
    (void)e;
    (void)s;
    TRACE();
    return hipSuccess;
}
EXPORT hipError_t hipEventSynchronize(hipEvent_t e)
{
    (void)e;
    TRACE();
    return hipSuccess;
}
EXPORT hipError_t hipEventQuery(hipEvent_t e)
{
    (void)e;
    TRACE();
    return hipSuccess;
}
EXPORT hipError_t hipEventElapsedTime(float* ms, hipEvent_t a, hipEvent_t b)
{
    (void)a;
    (void)b;
    TRACE();
    *ms = 1.0f; /* nothing ran; a constant, never a measurement */
    return hipSuccess;
}

/* ---------------------------------------------------------------- modules and launches */

/* EF_AMDGPU_MACH values of the LLVM AMDGPU ELF ABI for the processors of interest. */
static const char* mach_name(unsigned m)
{
    switch(m)
    {
    case 0x02c: return "gfx900";
    case 0x02d: return "gfx902";
    case 0x02e: return "gfx904";
    case 0x02f: return "gfx906";
    case 0x030: return "gfx908";
    case 0x031: return "gfx909";
    case 0x032: return "gfx90c";
    case 0x03f: return "gfx90a";
    default: return NULL;
    }
}

struct fake_module
{
    char tag[8];
    char mach[16];
};

static hipError_t check_code_object(const void* img, struct fake_module* m)
{
    const unsigned char* b = img;
    __atomic_add_fetch(&n_modload, 1, __ATOMIC_RELAXED);
    if(!b || memcmp(b, "\177ELF", 4) != 0 || b[4] != 2 /* ELFCLASS64 */)
    {
        const int bundle = b && memcmp(b, "__CLANG_OFFLOAD_BUNDLE__", 24) == 0;
        logf_("hipModuleLoadData: not an ELF64 image (%s)", bundle ? "offload bundle" : "unknown");
        snprintf(m->mach, sizeof m->mach, "%s", bundle ? "bundle" : "unknown");
        __atomic_add_fetch(&n_modload_bad, 1, __ATOMIC_RELAXED);
        return hipSuccess;
    }
    uint16_t machine;
    uint32_t flags;
    memcpy(&machine, b + 18, 2);
    memcpy(&flags, b + 48, 4);
    const char* name = mach_name(flags & 0xff);
    snprintf(m->mach, sizeof m->mach, "%s", name ? name : "other");
    /* compare with the processor part of the target id ("gfx90c" of "gfx90c:xnack-") */
    const size_t base_len = strcspn(g_arch, ":");
    if(machine != 224 /* EM_AMDGPU */ || !name || strlen(name) != base_len ||
       strncmp(name, g_arch, base_len) != 0)
    {
        __atomic_add_fetch(&n_modload_bad, 1, __ATOMIC_RELAXED);
        logf_("hipModuleLoadData: code object for %s (e_machine %u, e_flags 0x%x), device is %s",
              name ? name : "?", machine, flags, g_arch);
        pthread_mutex_lock(&g_lock);
        if(strlen(bad_mach_seen) + 20 < sizeof bad_mach_seen && !strstr(bad_mach_seen, m->mach))
        {
            strcat(bad_mach_seen, bad_mach_seen[0] ? "," : "");
            strcat(bad_mach_seen, m->mach);
        }
        pthread_mutex_unlock(&g_lock);
    }
    else
    {
        __atomic_add_fetch(&n_modload_ok_mach, 1, __ATOMIC_RELAXED);
        /* EF_AMDGPU_FEATURE_XNACK_V4 bits 0x300: 0x100 any, 0x200 off, 0x300 on */
        const unsigned x = flags & 0x300;
        logf_("module: code object for %s%s accepted", name,
              x == 0x200 ? ":xnack-" : x == 0x300 ? ":xnack+" : x == 0x100 ? " (xnack any)" : "");
    }
    return hipSuccess;
}

EXPORT hipError_t hipModuleLoadData(hipModule_t* mod, const void* img)
{
    TRACE();
    fd_init();
    struct fake_module* m = calloc(1, sizeof *m);
    snprintf(m->tag, sizeof m->tag, "module");
    check_code_object(img, m);
    *mod = (hipModule_t)m;
    return hipSuccess;
}
EXPORT hipError_t hipModuleLoadDataEx(hipModule_t* mod, const void* img, unsigned int n,
                                      hipJitOption* o, void** v)
{
    (void)n;
    (void)o;
    (void)v;
    TRACE();
    return hipModuleLoadData(mod, img);
}
EXPORT hipError_t hipModuleLoad(hipModule_t* mod, const char* path)
{
    TRACE();
    fd_init();
    struct fake_module* m = calloc(1, sizeof *m);
    snprintf(m->tag, sizeof m->tag, "module");
    FILE* f = fopen(path, "rb");
    unsigned char head[64] = {0};
    if(f)
    {
        size_t got = fread(head, 1, sizeof head, f);
        (void)got;
        fclose(f);
    }
    check_code_object(head, m);
    *mod = (hipModule_t)m;
    return hipSuccess;
}
EXPORT hipError_t hipModuleUnload(hipModule_t m)
{
    TRACE();
    free(m);
    return hipSuccess;
}
EXPORT hipError_t hipModuleGetFunction(hipFunction_t* f, hipModule_t m, const char* name)
{
    (void)m;
    (void)name;
    TRACE();
    *f = (hipFunction_t)fake_new("func");
    return hipSuccess;
}
EXPORT hipError_t hipFuncGetAttributes(struct hipFuncAttributes* a, const void* f)
{
    (void)f;
    TRACE();
    memset(a, 0, sizeof *a);
    a->maxThreadsPerBlock = 1024;
    return hipSuccess;
}
EXPORT hipError_t hipModuleOccupancyMaxActiveBlocksPerMultiprocessor(int* n, hipFunction_t f,
                                                                     int bs, size_t sh)
{
    (void)f;
    (void)sh;
    TRACE();
    *n = bs > 0 ? (2560 / bs > 0 ? 2560 / bs : 1) : 1;
    return hipSuccess;
}

static hipError_t fake_launch(const char* what)
{
    unsigned long k = __atomic_add_fetch(&n_launch, 1, __ATOMIC_RELAXED);
    if(k <= 5)
        logf_("%s: launch skipped (no GPU; nothing runs)", what);
    return hipSuccess;
}
EXPORT hipError_t hipModuleLaunchKernel(hipFunction_t f, unsigned gx, unsigned gy, unsigned gz,
                                        unsigned bx, unsigned by, unsigned bz, unsigned sh,
                                        hipStream_t s, void** p, void** e)
{
    (void)f, (void)gx, (void)gy, (void)gz, (void)bx, (void)by, (void)bz, (void)sh, (void)s,
        (void)p, (void)e;
    TRACE();
    return fake_launch(__func__);
}
EXPORT hipError_t hipModuleLaunchCooperativeKernel(hipFunction_t f, unsigned gx, unsigned gy,
                                                   unsigned gz, unsigned bx, unsigned by,
                                                   unsigned bz, unsigned sh, hipStream_t s,
                                                   void** p)
{
    (void)f, (void)gx, (void)gy, (void)gz, (void)bx, (void)by, (void)bz, (void)sh, (void)s,
        (void)p;
    TRACE();
    return fake_launch(__func__);
}
/* hip_ext.h is C++-only; same parameters as declared there. */
EXPORT hipError_t hipExtModuleLaunchKernel(hipFunction_t f, uint32_t gx, uint32_t gy, uint32_t gz,
                                           uint32_t lx, uint32_t ly, uint32_t lz, size_t sh,
                                           hipStream_t s, void** p, void** e, hipEvent_t start,
                                           hipEvent_t stop, uint32_t flags)
{
    (void)f, (void)gx, (void)gy, (void)gz, (void)lx, (void)ly, (void)lz, (void)sh, (void)s,
        (void)p, (void)e, (void)start, (void)stop, (void)flags;
    TRACE();
    return fake_launch(__func__);
}
EXPORT hipError_t hipHccModuleLaunchKernel(hipFunction_t f, uint32_t gx, uint32_t gy, uint32_t gz,
                                           uint32_t lx, uint32_t ly, uint32_t lz, size_t sh,
                                           hipStream_t s, void** p, void** e, hipEvent_t start,
                                           hipEvent_t stop)
{
    (void)f, (void)gx, (void)gy, (void)gz, (void)lx, (void)ly, (void)lz, (void)sh, (void)s,
        (void)p, (void)e, (void)start, (void)stop;
    TRACE();
    return fake_launch(__func__);
}
EXPORT hipError_t hipLaunchKernel(const void* f, dim3 g, dim3 b, void** a, size_t sh, hipStream_t s)
{
    (void)f, (void)g, (void)b, (void)a, (void)sh, (void)s;
    TRACE();
    return fake_launch(__func__);
}

/* Kernel-launch plumbing emitted by the compiler for <<<>>> in rocBLAS/rocRAND host code. */
static __thread dim3 cfg_g, cfg_b;
static __thread size_t cfg_sh;
static __thread hipStream_t cfg_s;
EXPORT hipError_t __hipPushCallConfiguration(dim3 g, dim3 b, size_t sh, hipStream_t s)
{
    cfg_g  = g;
    cfg_b  = b;
    cfg_sh = sh;
    cfg_s  = s;
    return hipSuccess;
}
EXPORT hipError_t __hipPopCallConfiguration(dim3* g, dim3* b, size_t* sh, hipStream_t* s)
{
    *g  = cfg_g;
    *b  = cfg_b;
    *sh = cfg_sh;
    *s  = cfg_s;
    return hipSuccess;
}
/* Fat binaries embedded in rocBLAS/rocRAND: accepted, never loaded. */
static void* fatbin_dummy[4];
EXPORT void** __hipRegisterFatBinary(const void* data)
{
    (void)data;
    first_call(__func__, __builtin_return_address(0));
    return fatbin_dummy;
}
EXPORT void __hipRegisterFunction(void** mods, const void* hf, char* df, const char* dn, int tl,
                                  void* tid, void* bid, dim3* bd, dim3* gd, int* ws)
{
    (void)mods, (void)hf, (void)df, (void)dn, (void)tl, (void)tid, (void)bid, (void)bd, (void)gd,
        (void)ws;
}
EXPORT void __hipRegisterVar(void** mods, void* var, char* hv, char* dv, int ext, size_t size,
                             int cst, int glb)
{
    (void)mods, (void)var, (void)hv, (void)dv, (void)ext, (void)size, (void)cst, (void)glb;
}
EXPORT void __hipUnregisterFatBinary(void** mods) { (void)mods; }

/* ---------------------------------------------------------------- optional experiment */

/* FAKEDEVICE_DROP_MNO_XNACK=1: drop "-mno-xnack" from the option lists libMIOpen gives comgr.
 * MIOpen adds it to every assembly build for an xnack-off target (src/comgr.cpp:666-669,
 * WORKAROUND_ISSUE_3001) and this image's comgr (LLVM 21) rejects it as an unknown argument.
 * Off by default: it changes MIOpen's compile path, to show what a one-line patch would give. */
typedef struct
{
    uint64_t handle;
} fd_comgr_action_info_t;
static unsigned long n_dropped;
EXPORT int amd_comgr_action_info_set_option_list(fd_comgr_action_info_t ai, const char* opts[],
                                                 size_t count)
{
    static int (*real)(fd_comgr_action_info_t, const char*[], size_t);
    if(!real)
        real = (int (*)(fd_comgr_action_info_t, const char*[], size_t))dlsym(
            RTLD_NEXT, "amd_comgr_action_info_set_option_list");
    const char* e = getenv("FAKEDEVICE_DROP_MNO_XNACK");
    if(!e || strcmp(e, "1") != 0 || !opts)
        return real(ai, opts, count);
    const char** kept = calloc(count ? count : 1, sizeof *kept);
    size_t n          = 0;
    for(size_t i = 0; i < count; i++)
    {
        if(opts[i] && strcmp(opts[i], "-mno-xnack") == 0)
        {
            __atomic_add_fetch(&n_dropped, 1, __ATOMIC_RELAXED);
            continue;
        }
        kept[n++] = opts[i];
    }
    int r = real(ai, kept, n);
    free(kept);
    return r;
}

/* ---------------------------------------------------------------- exit summary */

__attribute__((destructor)) static void fd_summary(void)
{
    fd_init();
    char names[4096] = "";
    for(int i = 0; i < n_seen; i++)
    {
        if(strlen(names) + strlen(seen_names[i]) + 4 >= sizeof names)
            break;
        strcat(names, i ? ",\"" : "\"");
        strcat(names, seen_names[i]);
        strcat(names, "\"");
    }
    char line[8192];
    snprintf(line, sizeof line,
             "{\"pid\":%d,\"arch\":\"%s\",\"cu\":%d,\"allocations\":%lu,\"module_loads\":%lu,"
             "\"module_loads_for_arch\":%lu,\"module_loads_other\":%lu,\"other_machs\":\"%s\","
             "\"launches_skipped\":%lu,\"hiprtc_isa_queries\":%lu,\"dropped_mno_xnack\":%lu,"
             "\"entry_points\":[%s]}",
             (int)getpid(), g_arch, g_cu, n_alloc, n_modload, n_modload_ok_mach, n_modload_bad,
             bad_mach_seen, n_launch, n_hiprtc_isa, n_dropped, names);
    const char* r = getenv("FAKEDEVICE_REPORT");
    if(r && *r)
    {
        FILE* f = fopen(r, "a");
        if(f)
        {
            fprintf(f, "%s\n", line);
            fclose(f);
        }
    }
    logf_("summary %s", line);
}
