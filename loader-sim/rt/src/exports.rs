//! The C entry points real programs call, with the symbol versions they require.
//!
//! Each function is defined under an internal name (`loader_sim_rt_<name>`) and published
//! as `<name>@@<node>` by a `.symver` directive: rustc links every cdylib with its own
//! anonymous version script, so the node cannot be assigned by a second script alone
//! (`exports.map` only defines the nodes). ROCm 5 libraries bind `__hipRegisterFatBinary
//! @hip_4.2` & co.; LLVM offload programs bind `__tgt_register_lib@VERS1.0`.
//!
//! Registration calls go to [`crate::shim`]. Everything else a program or library needs in
//! order to load (`hipMalloc`, `hipLaunchKernel`, `__tgt_target_kernel`, ...) is a stub
//! that touches none of its arguments and reports that there is no device
//! (`hipErrorNoDevice`, OpenMP `OFFLOAD_FAIL`).

#![allow(non_snake_case)]

use std::ffi::{c_char, c_int, c_uint, c_void};

use offload_image::registration::view::c_string;
use offload_image::registration::GlobalKind;

use crate::process::ProcessSpace;
use crate::shim::{self, Global};

/// `hipSuccess`.
const HIP_SUCCESS: c_int = 0;
/// `hipErrorNoDevice`: what every device operation of the simulated runtime returns.
const HIP_ERROR_NO_DEVICE: c_int = 100;
/// libomptarget's `OFFLOAD_FAIL`.
const OFFLOAD_FAIL: c_int = !0;

/// Publishes `$impl` as `$export@@$node`.
macro_rules! symver {
    ($node:literal: $($export:ident = $impl:ident),* $(,)?) => {
        $(core::arch::global_asm!(concat!(
            ".symver ", stringify!($impl), ", ", stringify!($export), "@@", $node
        ));)*
    };
}

/// Stubs that report "no device" (`$err`, named `$err_name` in the runtime's API) and touch
/// no argument, published under the version node `$node`.
macro_rules! no_device_stubs {
    ($node:literal, $err:ident, $err_name:literal;
     $($export:ident = $impl:ident ( $($arg:ident : $ty:ty),* );)*) => {
        $(
            #[doc = concat!("`", stringify!($export), "`: no device (`", $err_name, "`).")]
            #[no_mangle]
            pub extern "C" fn $impl($($arg: $ty),*) -> c_int {
                $(let _ = $arg;)*
                $err
            }
        )*
        symver!($node: $($export = $impl),*);
    };
}

/// A NUL-terminated name passed by the program, read within the mapping that holds it.
fn name(p: *const c_char) -> Option<&'static [u8]> {
    c_string(&ProcessSpace, p as u64).ok()
}

/// Reports a global that the program registers with the fat binary handle `h` through
/// `call`, at host address `address`: named by `primary`, else by `fallback`.
fn global(
    h: usize,
    call: &'static str,
    address: u64,
    primary: *const c_char,
    fallback: *const c_char,
    g: Global,
) {
    let n = name(primary).or_else(|| name(fallback));
    shim::with(|s| s.register_global(h, call, address, n, g));
}

/// A surface or texture reference.
fn reference(kind: GlobalKind, ty: c_int, normalized: c_int, ext: c_int) -> Global {
    Global::Reference {
        kind,
        ty: ty as u64,
        normalized: normalized != 0,
        external: ext != 0,
    }
}

/// `dim3`, passed by value to `__hipPushCallConfiguration` and `hipLaunchKernel`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct Dim3 {
    /// x.
    pub x: c_uint,
    /// y.
    pub y: c_uint,
    /// z.
    pub z: c_uint,
}

// --- HIP registration (hip_4.2) ---------------------------------------------------------

symver!("hip_4.2":
    __hipRegisterFatBinary = loader_sim_rt___hipRegisterFatBinary,
    __hipRegisterFunction = loader_sim_rt___hipRegisterFunction,
    __hipRegisterVar = loader_sim_rt___hipRegisterVar,
    __hipRegisterManagedVar = loader_sim_rt___hipRegisterManagedVar,
    __hipRegisterSurface = loader_sim_rt___hipRegisterSurface,
    __hipRegisterTexture = loader_sim_rt___hipRegisterTexture,
    __hipUnregisterFatBinary = loader_sim_rt___hipUnregisterFatBinary,
    __hipPushCallConfiguration = loader_sim_rt___hipPushCallConfiguration,
    __hipPopCallConfiguration = loader_sim_rt___hipPopCallConfiguration,
);

/// `void **__hipRegisterFatBinary(const void *wrapper)`: null when the wrapper is refused.
#[no_mangle]
pub extern "C" fn loader_sim_rt___hipRegisterFatBinary(wrapper: *const c_void) -> *mut *mut c_void {
    let handle = shim::with(|s| s.register_fat_binary("__hipRegisterFatBinary", wrapper as u64));
    std::ptr::with_exposed_provenance_mut(handle)
}

/// `void __hipRegisterFunction(void **h, const void *hostFunction, char *deviceFunction,
/// const char *deviceName, unsigned threadLimit, uint3 *tid, uint3 *bid, dim3 *blockDim,
/// dim3 *gridDim, int *wSize)`.
#[no_mangle]
pub extern "C" fn loader_sim_rt___hipRegisterFunction(
    h: *mut *mut c_void,
    host_function: *const c_void,
    device_function: *const c_char,
    device_name: *const c_char,
    _thread_limit: c_uint,
    _tid: *mut c_void,
    _bid: *mut c_void,
    _block_dim: *mut c_void,
    _grid_dim: *mut c_void,
    _w_size: *mut c_int,
) {
    global(
        h.expose_provenance(),
        "__hipRegisterFunction",
        host_function as u64,
        device_name,
        device_function,
        Global::Function,
    );
}

/// `void __hipRegisterVar(void **h, void *var, char *hostVar, char *deviceVar, int ext,
/// size_t size, int constant, int global)`.
#[no_mangle]
pub extern "C" fn loader_sim_rt___hipRegisterVar(
    h: *mut *mut c_void,
    var: *mut c_void,
    host_var: *const c_char,
    device_var: *const c_char,
    ext: c_int,
    size: usize,
    constant: c_int,
    _global: c_int,
) {
    let g = Global::Var {
        size: size as u64,
        external: ext != 0,
        constant: constant != 0,
    };
    global(
        h.expose_provenance(),
        "__hipRegisterVar",
        var as u64,
        device_var,
        host_var,
        g,
    );
}

/// `void __hipRegisterManagedVar(void *h, void **pointer, void *init_value,
/// const char *name, size_t size, unsigned align)`.
#[no_mangle]
pub extern "C" fn loader_sim_rt___hipRegisterManagedVar(
    h: *mut c_void,
    pointer: *mut *mut c_void,
    _init_value: *mut c_void,
    var_name: *const c_char,
    size: usize,
    align: c_uint,
) {
    let g = Global::Managed {
        size: size as u64,
        align: u64::from(align),
    };
    global(
        h.expose_provenance(),
        "__hipRegisterManagedVar",
        pointer as u64,
        var_name,
        std::ptr::null(),
        g,
    );
}

/// `void __hipRegisterSurface(void **h, void *var, char *hostVar, char *deviceVar,
/// int type, int ext)`.
#[no_mangle]
pub extern "C" fn loader_sim_rt___hipRegisterSurface(
    h: *mut *mut c_void,
    var: *mut c_void,
    host_var: *const c_char,
    device_var: *const c_char,
    ty: c_int,
    ext: c_int,
) {
    let g = reference(GlobalKind::Surface, ty, 0, ext);
    global(
        h.expose_provenance(),
        "__hipRegisterSurface",
        var as u64,
        device_var,
        host_var,
        g,
    );
}

/// `void __hipRegisterTexture(void **h, void *var, char *hostVar, char *deviceVar,
/// int type, int norm, int ext)`.
#[no_mangle]
pub extern "C" fn loader_sim_rt___hipRegisterTexture(
    h: *mut *mut c_void,
    var: *mut c_void,
    host_var: *const c_char,
    device_var: *const c_char,
    ty: c_int,
    norm: c_int,
    ext: c_int,
) {
    let g = reference(GlobalKind::Texture, ty, norm, ext);
    global(
        h.expose_provenance(),
        "__hipRegisterTexture",
        var as u64,
        device_var,
        host_var,
        g,
    );
}

/// `void __hipUnregisterFatBinary(void **h)`.
#[no_mangle]
pub extern "C" fn loader_sim_rt___hipUnregisterFatBinary(h: *mut *mut c_void) {
    shim::with(|s| s.unregister_fat_binary(h.expose_provenance()));
}

// --- CUDA registration (libcudart.so.13) ------------------------------------------------

/// `cudaSuccess`.
const CUDA_SUCCESS: c_int = 0;
/// `cudaErrorNoDevice`.
const CUDA_ERROR_NO_DEVICE: c_int = 100;

symver!("libcudart.so.13":
    __cudaRegisterFatBinary = loader_sim_rt___cudaRegisterFatBinary,
    __cudaRegisterFatBinaryEnd = loader_sim_rt___cudaRegisterFatBinaryEnd,
    __cudaRegisterFunction = loader_sim_rt___cudaRegisterFunction,
    __cudaRegisterVar = loader_sim_rt___cudaRegisterVar,
    __cudaRegisterManagedVar = loader_sim_rt___cudaRegisterManagedVar,
    __cudaRegisterSurface = loader_sim_rt___cudaRegisterSurface,
    __cudaRegisterTexture = loader_sim_rt___cudaRegisterTexture,
    __cudaUnregisterFatBinary = loader_sim_rt___cudaUnregisterFatBinary,
    __cudaPushCallConfiguration = loader_sim_rt___cudaPushCallConfiguration,
    __cudaPopCallConfiguration = loader_sim_rt___cudaPopCallConfiguration,
    __cudaLaunchKernel = loader_sim_rt___cudaLaunchKernel,
    __cudaGetKernel = loader_sim_rt___cudaGetKernel,
);

/// `void **__cudaRegisterFatBinary(void *fatCubin)`: `fatCubin` is the
/// `__fatBinC_Wrapper_t` (magic `0x466243B1`) of `.nvFatBinSegment`; null on refusal.
#[no_mangle]
pub extern "C" fn loader_sim_rt___cudaRegisterFatBinary(
    wrapper: *const c_void,
) -> *mut *mut c_void {
    let handle = shim::with(|s| s.register_fat_binary("__cudaRegisterFatBinary", wrapper as u64));
    std::ptr::with_exposed_provenance_mut(handle)
}

/// `void __cudaRegisterFatBinaryEnd(void **fatCubinHandle)`: the registration is complete
/// (the shim reports a unit when it is unregistered or the process exits).
#[no_mangle]
pub extern "C" fn loader_sim_rt___cudaRegisterFatBinaryEnd(_h: *mut *mut c_void) {}

/// `void __cudaRegisterFunction(void **fatCubinHandle, const char *hostFun, char
/// *deviceFun, const char *deviceName, int thread_limit, uint3 *tid, uint3 *bid, dim3 *bDim,
/// dim3 *gDim, int *wSize)`.
#[no_mangle]
pub extern "C" fn loader_sim_rt___cudaRegisterFunction(
    h: *mut *mut c_void,
    host_function: *const c_void,
    device_function: *const c_char,
    device_name: *const c_char,
    _thread_limit: c_int,
    _tid: *mut c_void,
    _bid: *mut c_void,
    _block_dim: *mut c_void,
    _grid_dim: *mut c_void,
    _w_size: *mut c_int,
) {
    global(
        h.expose_provenance(),
        "__cudaRegisterFunction",
        host_function as u64,
        device_name,
        device_function,
        Global::Function,
    );
}

/// `void __cudaRegisterVar(void **fatCubinHandle, char *hostVar, char *deviceAddress,
/// const char *deviceName, int ext, size_t size, int constant, int global)`: a
/// `__device__` or `__constant__` variable.
#[no_mangle]
pub extern "C" fn loader_sim_rt___cudaRegisterVar(
    h: *mut *mut c_void,
    host_var: *mut c_char,
    device_address: *const c_char,
    device_name: *const c_char,
    ext: c_int,
    size: usize,
    constant: c_int,
    _global: c_int,
) {
    let g = Global::Var {
        size: size as u64,
        external: ext != 0,
        constant: constant != 0,
    };
    global(
        h.expose_provenance(),
        "__cudaRegisterVar",
        host_var as u64,
        device_name,
        device_address,
        g,
    );
}

/// `void __cudaRegisterManagedVar(void **fatCubinHandle, void **hostVarPtrAddress,
/// char *deviceAddress, const char *deviceName, int ext, size_t size, int constant,
/// int global)`: a `__managed__` variable.
#[no_mangle]
pub extern "C" fn loader_sim_rt___cudaRegisterManagedVar(
    h: *mut *mut c_void,
    pointer: *mut *mut c_void,
    device_address: *const c_char,
    device_name: *const c_char,
    _ext: c_int,
    size: usize,
    _constant: c_int,
    _global: c_int,
) {
    let g = Global::Managed {
        size: size as u64,
        align: 0,
    };
    global(
        h.expose_provenance(),
        "__cudaRegisterManagedVar",
        pointer as u64,
        device_name,
        device_address,
        g,
    );
}

/// `void __cudaRegisterSurface(void **fatCubinHandle, const struct surfaceReference
/// *hostvar, const void **deviceAddress, const char *deviceName, int dim, int ext)`.
#[no_mangle]
pub extern "C" fn loader_sim_rt___cudaRegisterSurface(
    h: *mut *mut c_void,
    host_var: *const c_void,
    device_address: *const c_char,
    device_name: *const c_char,
    dim: c_int,
    ext: c_int,
) {
    let g = reference(GlobalKind::Surface, dim, 0, ext);
    global(
        h.expose_provenance(),
        "__cudaRegisterSurface",
        host_var as u64,
        device_name,
        device_address,
        g,
    );
}

/// `void __cudaRegisterTexture(void **fatCubinHandle, const struct textureReference
/// *hostvar, const void **deviceAddress, const char *deviceName, int dim, int norm,
/// int ext)`.
#[no_mangle]
pub extern "C" fn loader_sim_rt___cudaRegisterTexture(
    h: *mut *mut c_void,
    host_var: *const c_void,
    device_address: *const c_char,
    device_name: *const c_char,
    dim: c_int,
    norm: c_int,
    ext: c_int,
) {
    let g = reference(GlobalKind::Texture, dim, norm, ext);
    global(
        h.expose_provenance(),
        "__cudaRegisterTexture",
        host_var as u64,
        device_name,
        device_address,
        g,
    );
}

/// `void __cudaUnregisterFatBinary(void **fatCubinHandle)`.
#[no_mangle]
pub extern "C" fn loader_sim_rt___cudaUnregisterFatBinary(h: *mut *mut c_void) {
    shim::with(|s| s.unregister_fat_binary(h.expose_provenance()));
}

/// `unsigned __cudaPushCallConfiguration(dim3 grid, dim3 block, size_t shmem, void *stream)`.
#[no_mangle]
pub extern "C" fn loader_sim_rt___cudaPushCallConfiguration(
    _grid: Dim3,
    _block: Dim3,
    _shared_mem: usize,
    _stream: *mut c_void,
) -> c_uint {
    0
}

/// `cudaError_t __cudaPopCallConfiguration(dim3 *grid, dim3 *block, size_t *shmem, void
/// *stream)`: nothing was pushed that a kernel could use.
#[no_mangle]
pub extern "C" fn loader_sim_rt___cudaPopCallConfiguration(
    _grid: *mut Dim3,
    _block: *mut Dim3,
    _shared_mem: *mut usize,
    _stream: *mut c_void,
) -> c_int {
    CUDA_ERROR_NO_DEVICE
}

/// `cudaError_t __cudaLaunchKernel(const void *func, dim3 grid, dim3 block, void **args,
/// size_t shmem, cudaStream_t stream)`: there is no device.
#[no_mangle]
pub extern "C" fn loader_sim_rt___cudaLaunchKernel(
    _func: *const c_void,
    _grid: Dim3,
    _block: Dim3,
    _args: *mut *mut c_void,
    _shared_mem: usize,
    _stream: *mut c_void,
) -> c_int {
    CUDA_ERROR_NO_DEVICE
}

/// `cudaError_t __cudaGetKernel(cudaKernel_t *kernel, const void *entry)`: there is no
/// device.
#[no_mangle]
pub extern "C" fn loader_sim_rt___cudaGetKernel(
    _kernel: *mut *mut c_void,
    _entry: *const c_void,
) -> c_int {
    CUDA_ERROR_NO_DEVICE
}

// --- CUDA runtime API stubs (libcudart.so.13) ------------------------------------------
//
// What a program's own code and clang's / nvcc's kernel launch stubs call (`kernel<<<...>>>`
// becomes `__cudaPushCallConfiguration`, then the stub's `__cudaPopCallConfiguration` and
// `cudaLaunchKernel`).

no_device_stubs! { "libcudart.so.13", CUDA_ERROR_NO_DEVICE, "cudaErrorNoDevice";
    cudaLaunchKernel = loader_sim_rt_cudaLaunchKernel(func: *const c_void, grid: Dim3, block: Dim3, args: *mut *mut c_void, shmem: usize, stream: *mut c_void);
    cudaMalloc = loader_sim_rt_cudaMalloc(ptr: *mut *mut c_void, size: usize);
    cudaFree = loader_sim_rt_cudaFree(ptr: *mut c_void);
    cudaMemcpy = loader_sim_rt_cudaMemcpy(dst: *mut c_void, src: *const c_void, n: usize, kind: c_int);
    cudaMemset = loader_sim_rt_cudaMemset(dst: *mut c_void, value: c_int, n: usize);
    cudaDeviceSynchronize = loader_sim_rt_cudaDeviceSynchronize();
}

symver!("libcudart.so.13":
    cudaGetLastError = loader_sim_rt_cudaGetLastError,
    cudaPeekAtLastError = loader_sim_rt_cudaPeekAtLastError,
    cudaGetErrorString = loader_sim_rt_cudaGetErrorString,
    cudaGetErrorName = loader_sim_rt_cudaGetErrorName,
);

/// `cudaError_t cudaGetLastError(void)`: as `hipGetLastError`, no call ever set an error
/// that a kernel launch could have left behind.
#[no_mangle]
pub extern "C" fn loader_sim_rt_cudaGetLastError() -> c_int {
    CUDA_SUCCESS
}

/// `cudaError_t cudaPeekAtLastError(void)`.
#[no_mangle]
pub extern "C" fn loader_sim_rt_cudaPeekAtLastError() -> c_int {
    CUDA_SUCCESS
}

/// `const char *cudaGetErrorString(cudaError_t)`.
#[no_mangle]
pub extern "C" fn loader_sim_rt_cudaGetErrorString(_error: c_int) -> *const c_char {
    ERROR_TEXT.as_ptr()
}

/// `const char *cudaGetErrorName(cudaError_t)`.
#[no_mangle]
pub extern "C" fn loader_sim_rt_cudaGetErrorName(_error: c_int) -> *const c_char {
    ERROR_TEXT.as_ptr()
}

/// `hipError_t __hipPushCallConfiguration(dim3 grid, dim3 block, size_t shmem, hipStream_t)`.
#[no_mangle]
pub extern "C" fn loader_sim_rt___hipPushCallConfiguration(
    _grid: Dim3,
    _block: Dim3,
    _shared_mem: usize,
    _stream: *mut c_void,
) -> c_int {
    HIP_SUCCESS
}

/// `hipError_t __hipPopCallConfiguration(dim3 *grid, dim3 *block, size_t *shmem,
/// hipStream_t *stream)`: nothing was pushed that a kernel could use.
#[no_mangle]
pub extern "C" fn loader_sim_rt___hipPopCallConfiguration(
    _grid: *mut Dim3,
    _block: *mut Dim3,
    _shared_mem: *mut usize,
    _stream: *mut *mut c_void,
) -> c_int {
    HIP_ERROR_NO_DEVICE
}

// --- HIP API stubs (hip_4.2) ------------------------------------------------------------

no_device_stubs! { "hip_4.2", HIP_ERROR_NO_DEVICE, "hipErrorNoDevice";
    hipLaunchKernel = loader_sim_rt_hipLaunchKernel(f: *const c_void, grid: Dim3, block: Dim3, args: *mut *mut c_void, shmem: usize, stream: *mut c_void);
    hipMalloc = loader_sim_rt_hipMalloc(ptr: *mut *mut c_void, size: usize);
    hipFree = loader_sim_rt_hipFree(ptr: *mut c_void);
    hipMemcpy = loader_sim_rt_hipMemcpy(dst: *mut c_void, src: *const c_void, n: usize, kind: c_int);
    hipMemcpyAsync = loader_sim_rt_hipMemcpyAsync(dst: *mut c_void, src: *const c_void, n: usize, kind: c_int, stream: *mut c_void);
    hipMemcpy2D = loader_sim_rt_hipMemcpy2D(dst: *mut c_void, dpitch: usize, src: *const c_void, spitch: usize, width: usize, height: usize, kind: c_int);
    hipMemset = loader_sim_rt_hipMemset(dst: *mut c_void, value: c_int, n: usize);
    hipMemsetAsync = loader_sim_rt_hipMemsetAsync(dst: *mut c_void, value: c_int, n: usize, stream: *mut c_void);
    hipMemset2DAsync = loader_sim_rt_hipMemset2DAsync(dst: *mut c_void, pitch: usize, value: c_int, width: usize, height: usize, stream: *mut c_void);
    hipGetDevice = loader_sim_rt_hipGetDevice(device: *mut c_int);
    hipSetDevice = loader_sim_rt_hipSetDevice(device: c_int);
    hipGetDeviceProperties = loader_sim_rt_hipGetDeviceProperties(props: *mut c_void, device: c_int);
    hipDeviceGetAttribute = loader_sim_rt_hipDeviceGetAttribute(value: *mut c_int, attr: c_int, device: c_int);
    hipDeviceSynchronize = loader_sim_rt_hipDeviceSynchronize();
    hipStreamCreate = loader_sim_rt_hipStreamCreate(stream: *mut *mut c_void);
    hipStreamDestroy = loader_sim_rt_hipStreamDestroy(stream: *mut c_void);
    hipStreamSynchronize = loader_sim_rt_hipStreamSynchronize(stream: *mut c_void);
    hipHostMalloc = loader_sim_rt_hipHostMalloc(ptr: *mut *mut c_void, size: usize, flags: c_uint);
    hipHostFree = loader_sim_rt_hipHostFree(ptr: *mut c_void);
    hipMallocManaged = loader_sim_rt_hipMallocManaged(ptr: *mut *mut c_void, size: usize, flags: c_uint);
    hipMemGetInfo = loader_sim_rt_hipMemGetInfo(free: *mut usize, total: *mut usize);
    hipEventCreate = loader_sim_rt_hipEventCreate(event: *mut *mut c_void);
    hipEventDestroy = loader_sim_rt_hipEventDestroy(event: *mut c_void);
    hipEventRecord = loader_sim_rt_hipEventRecord(event: *mut c_void, stream: *mut c_void);
    hipEventSynchronize = loader_sim_rt_hipEventSynchronize(event: *mut c_void);
    hipEventElapsedTime = loader_sim_rt_hipEventElapsedTime(ms: *mut f32, start: *mut c_void, stop: *mut c_void);
    hipFuncGetAttributes = loader_sim_rt_hipFuncGetAttributes(attr: *mut c_void, func: *const c_void);
    hipModuleLoadData = loader_sim_rt_hipModuleLoadData(module: *mut *mut c_void, image: *const c_void);
    hipModuleGetFunction = loader_sim_rt_hipModuleGetFunction(function: *mut *mut c_void, module: *mut c_void, name: *const c_char);
    hipModuleLaunchKernel = loader_sim_rt_hipModuleLaunchKernel(f: *mut c_void, gx: c_uint, gy: c_uint, gz: c_uint, bx: c_uint, by: c_uint, bz: c_uint, shmem: c_uint, stream: *mut c_void, params: *mut *mut c_void, extra: *mut *mut c_void);
    hipModuleUnload = loader_sim_rt_hipModuleUnload(module: *mut c_void);
    hipRuntimeGetVersion = loader_sim_rt_hipRuntimeGetVersion(version: *mut c_int);
    hipDriverGetVersion = loader_sim_rt_hipDriverGetVersion(version: *mut c_int);
}

symver!("hip_4.2":
    hipGetLastError = loader_sim_rt_hipGetLastError,
    hipPeekAtLastError = loader_sim_rt_hipPeekAtLastError,
    hipGetDeviceCount = loader_sim_rt_hipGetDeviceCount,
    hipGetErrorString = loader_sim_rt_hipGetErrorString,
    hipGetErrorName = loader_sim_rt_hipGetErrorName,
);

/// `hipError_t hipGetLastError(void)`: no call ever set an error that a kernel launch
/// could have left behind.
#[no_mangle]
pub extern "C" fn loader_sim_rt_hipGetLastError() -> c_int {
    HIP_SUCCESS
}

/// `hipError_t hipPeekAtLastError(void)`.
#[no_mangle]
pub extern "C" fn loader_sim_rt_hipPeekAtLastError() -> c_int {
    HIP_SUCCESS
}

/// `hipError_t hipGetDeviceCount(int *count)`: sets `*count = 0`.
///
/// # Safety
///
/// `count` is null or points to an `int` the caller owns (HIP's contract).
#[no_mangle]
pub unsafe extern "C" fn loader_sim_rt_hipGetDeviceCount(count: *mut c_int) -> c_int {
    if !count.is_null() && count.is_aligned() {
        // SAFETY: the caller passes a pointer to an `int` it owns (HIP's contract); it is
        // non-null and aligned.
        unsafe { count.write(0) };
    }
    HIP_ERROR_NO_DEVICE
}

const ERROR_TEXT: &std::ffi::CStr = c"loader-sim-rt: simulated runtime, no device";

/// `const char *hipGetErrorString(hipError_t)`.
#[no_mangle]
pub extern "C" fn loader_sim_rt_hipGetErrorString(_error: c_int) -> *const c_char {
    ERROR_TEXT.as_ptr()
}

/// `const char *hipGetErrorName(hipError_t)`.
#[no_mangle]
pub extern "C" fn loader_sim_rt_hipGetErrorName(_error: c_int) -> *const c_char {
    ERROR_TEXT.as_ptr()
}

// --- LLVM offload (VERS1.0) -------------------------------------------------------------

symver!("VERS1.0":
    __tgt_register_lib = loader_sim_rt___tgt_register_lib,
    __tgt_unregister_lib = loader_sim_rt___tgt_unregister_lib,
    __tgt_register_requires = loader_sim_rt___tgt_register_requires,
    __tgt_init_all_rtls = loader_sim_rt___tgt_init_all_rtls,
    __tgt_target_kernel = loader_sim_rt___tgt_target_kernel,
    __tgt_target_data_begin_mapper = loader_sim_rt___tgt_target_data_begin_mapper,
    __tgt_target_data_end_mapper = loader_sim_rt___tgt_target_data_end_mapper,
    __tgt_target_data_update_mapper = loader_sim_rt___tgt_target_data_update_mapper,
    __tgt_push_mapper_component = loader_sim_rt___tgt_push_mapper_component,
    __tgt_mapper_num_components = loader_sim_rt___tgt_mapper_num_components,
    __tgt_set_info_flag = loader_sim_rt___tgt_set_info_flag,
);

/// `void __tgt_register_lib(__tgt_bin_desc *desc)`.
#[no_mangle]
pub extern "C" fn loader_sim_rt___tgt_register_lib(desc: *mut c_void) {
    shim::with(|s| s.register_lib(desc as u64));
}

/// `void __tgt_unregister_lib(__tgt_bin_desc *desc)`.
#[no_mangle]
pub extern "C" fn loader_sim_rt___tgt_unregister_lib(desc: *mut c_void) {
    shim::with(|s| s.unregister_lib(desc as u64));
}

/// `void __tgt_register_requires(int64_t flags)`: removed from LLVM (requirements travel
/// as entries, `REGISTRATION.md` §3.1); accepted and ignored, as its remaining stub does.
#[no_mangle]
pub extern "C" fn loader_sim_rt___tgt_register_requires(_flags: i64) {}

/// `void __tgt_init_all_rtls(void)`.
#[no_mangle]
pub extern "C" fn loader_sim_rt___tgt_init_all_rtls() {}

/// `int __tgt_target_kernel(ident_t *, int64_t device, int32_t teams, int32_t threads,
/// void *host_ptr, __tgt_kernel_arguments *)`: fails, so the program runs the host version.
#[no_mangle]
pub extern "C" fn loader_sim_rt___tgt_target_kernel(
    _loc: *mut c_void,
    _device: i64,
    _teams: i32,
    _threads: i32,
    _host_ptr: *mut c_void,
    _args: *mut c_void,
) -> c_int {
    OFFLOAD_FAIL
}

/// Data-mapping entry points: nothing to map without a device.
macro_rules! omp_mappers {
    ($($impl:ident),*) => {$(
        #[doc = concat!("`", stringify!($impl), "`: no device, nothing mapped.")]
        #[no_mangle]
        pub extern "C" fn $impl(
            _loc: *mut c_void,
            _device: i64,
            _n: i32,
            _bases: *mut *mut c_void,
            _ptrs: *mut *mut c_void,
            _sizes: *mut i64,
            _types: *mut i64,
            _names: *mut *mut c_void,
            _mappers: *mut *mut c_void,
        ) {
        }
    )*};
}

omp_mappers!(
    loader_sim_rt___tgt_target_data_begin_mapper,
    loader_sim_rt___tgt_target_data_end_mapper,
    loader_sim_rt___tgt_target_data_update_mapper
);

/// `void __tgt_push_mapper_component(void *handle, void *base, void *begin, int64_t size,
/// int64_t type, void *name)`.
#[no_mangle]
pub extern "C" fn loader_sim_rt___tgt_push_mapper_component(
    _handle: *mut c_void,
    _base: *mut c_void,
    _begin: *mut c_void,
    _size: i64,
    _ty: i64,
    _name: *mut c_void,
) {
}

/// `int64_t __tgt_mapper_num_components(void *handle)`.
#[no_mangle]
pub extern "C" fn loader_sim_rt___tgt_mapper_num_components(_handle: *mut c_void) -> i64 {
    0
}

/// `void __tgt_set_info_flag(uint32_t)`.
#[no_mangle]
pub extern "C" fn loader_sim_rt___tgt_set_info_flag(_flags: u32) {}

// --- Unloading ----------------------------------------------------------------------------

/// Writes the records of units still registered when the shim is unloaded (process exit:
/// programs' own destructors, which unregister, run before those of the libraries they
/// depend on).
extern "C" fn at_unload() {
    shim::finish();
}

#[used]
#[link_section = ".fini_array"]
static AT_UNLOAD: extern "C" fn() = at_unload;
