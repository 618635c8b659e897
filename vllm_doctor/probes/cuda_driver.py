"""The CUDA driver API through ctypes, for what torch does not expose: loading a module image
as the driver would (the kernels probe) and mapping another process's GPU memory into this
process's own context (the peer copies of p2p-nccl), without creating a context on the other
GPU. Imported only in worker processes."""

from __future__ import annotations

import ctypes

IPC_HANDLE_BYTES = 64
CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS = 1


class IpcHandle(ctypes.Structure):
    """CUipcMemHandle: 64 opaque bytes, passed to cuIpcOpenMemHandle by value."""

    _fields_ = [("reserved", ctypes.c_char * IPC_HANDLE_BYTES)]


class CudaError(RuntimeError):
    def __init__(self, what: str, code: int, said: str):
        super().__init__(f"{what}: {said}")
        self.code = code


class Driver:
    """libcuda, initialised; contexts are the devices' primary contexts (the ones torch uses)."""

    def __init__(self) -> None:
        self.lib = ctypes.CDLL("libcuda.so.1")
        self.lib.cuModuleLoadData.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p]
        self.lib.cuMemGetAddressRange_v2.argtypes = [
            ctypes.POINTER(ctypes.c_uint64),
            ctypes.POINTER(ctypes.c_size_t),
            ctypes.c_uint64,
        ]
        self.lib.cuIpcGetMemHandle.argtypes = [ctypes.POINTER(IpcHandle), ctypes.c_uint64]
        self.lib.cuIpcOpenMemHandle_v2.argtypes = [
            ctypes.POINTER(ctypes.c_uint64),
            IpcHandle,  # by value: a ctypes array here would pass a pointer
            ctypes.c_uint,
        ]
        self.lib.cuIpcCloseMemHandle.argtypes = [ctypes.c_uint64]
        self.lib.cuMemcpyDtoD_v2.argtypes = [ctypes.c_uint64, ctypes.c_uint64, ctypes.c_size_t]
        self.check(self.lib.cuInit(0), "cuInit")
        self.contexts: dict[int, ctypes.c_void_p] = {}

    def error(self, code: int) -> str:
        """``CUDA_ERROR_NAME (code): the driver's own message``."""
        text = ctypes.c_char_p()
        name = ctypes.c_char_p()
        self.lib.cuGetErrorString(code, ctypes.byref(text))
        self.lib.cuGetErrorName(code, ctypes.byref(name))
        said = (text.value or b"unknown error").decode(errors="replace")
        return f"{(name.value or b'CUDA_ERROR').decode(errors='replace')} ({code}): {said}"

    def check(self, code: int, what: str) -> None:
        if code:
            raise CudaError(what, code, self.error(code))

    def use(self, ordinal: int) -> None:
        """Make the primary context of device ``ordinal`` current in this thread."""
        if ordinal not in self.contexts:
            dev = ctypes.c_int()
            self.check(self.lib.cuDeviceGet(ctypes.byref(dev), ordinal), "cuDeviceGet")
            ctx = ctypes.c_void_p()
            self.check(
                self.lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev),
                "cuDevicePrimaryCtxRetain",
            )
            self.contexts[ordinal] = ctx
        self.check(self.lib.cuCtxSetCurrent(self.contexts[ordinal]), "cuCtxSetCurrent")

    def load(self, image: bytes) -> int:
        """Load one image (fatbin, cubin or PTX) in the current context and unload it again:
        0, or the driver's error code."""
        buffer = ctypes.create_string_buffer(image, len(image) + 1)  # PTX wants a NUL at the end
        module = ctypes.c_void_p()
        code = int(self.lib.cuModuleLoadData(ctypes.byref(module), buffer))
        if code == 0:
            self.lib.cuModuleUnload(module)
        return code

    # -- memory of another process (CUDA IPC) --------------------------------------------
    def ipc_handle(self, address: int) -> tuple[bytes, int]:
        """(handle, offset) exporting the allocation that holds ``address`` (a caching
        allocator's tensor lies inside a larger allocation: the offset finds it again)."""
        base, size = ctypes.c_uint64(), ctypes.c_size_t()
        self.check(
            self.lib.cuMemGetAddressRange_v2(ctypes.byref(base), ctypes.byref(size), address),
            "cuMemGetAddressRange",
        )
        handle = IpcHandle()
        self.check(
            self.lib.cuIpcGetMemHandle(ctypes.byref(handle), base.value), "cuIpcGetMemHandle"
        )
        return bytes(handle), address - base.value  # all 64 bytes (the field stops at a NUL)

    def ipc_open(self, handle: bytes) -> int:
        """Map another process's allocation into the current context (peer access enabled as
        needed, no context created on the other GPU): its base address here."""
        raw = IpcHandle.from_buffer_copy(handle)
        ptr = ctypes.c_uint64()
        self.check(
            self.lib.cuIpcOpenMemHandle_v2(
                ctypes.byref(ptr), raw, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS
            ),
            "cuIpcOpenMemHandle",
        )
        return ptr.value

    def ipc_close(self, base: int) -> None:
        self.check(self.lib.cuIpcCloseMemHandle(base), "cuIpcCloseMemHandle")

    def copy(self, dst: int, src: int, nbytes: int) -> None:
        """A device-to-device copy through unified addressing (peer memory included)."""
        self.check(self.lib.cuMemcpyDtoD_v2(dst, src, nbytes), "cuMemcpyDtoD")

    def synchronize(self) -> None:
        self.check(self.lib.cuCtxSynchronize(), "cuCtxSynchronize")
