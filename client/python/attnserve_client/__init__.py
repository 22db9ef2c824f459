"""attnserve_client: Python client of the attnserve attention service.

    import numpy as np
    from attnserve_client import Client

    q = k = v = np.random.randn(1, 1024, 8, 64).astype(np.float16)
    with Client("localhost:50051") as client:
        out, timing = client.attend(q, k, v)
    print(timing)

See client.Client.attend for the accepted array types (fp16, bf16 via
ml_dtypes or raw bits, float32 with dtype=...) and FlashAttention-2's
options (causal, window_size, return_lse, GQA k/v, cu_seqlens for varlen).
Client.attend also takes bf16/fp16 torch tensors (CPU or CUDA) and then
returns torch tensors on q's device; flash_attn_func / flash_attn_varlen_func
(module flash_attn) do so in FA2's conventions. torch is never imported.

Calls go through the C++ client (libattn_client_c.so, via ctypes) when that
library is found, else through grpcio: Client(transport="auto"|"native"|
"grpcio"); the native transport needs neither grpcio nor protobuf.

Same-host zero-copy (a server started with --allow_shared_memory):
SystemSharedMemory places NumPy arrays in POSIX shared memory, which
Client.register_system_region registers; Client.register_cuda_tensor does
the same for torch CUDA tensors (CUDA IPC); Client.attend then sends tensors
in registered regions by reference and writes `out=` in place.

KV-cache sessions (a server with --kv_cache_bytes > 0; needs grpcio):
Client.open_session returns a Session, whose attend(layer, q, k, v) sends
only the new tokens and appends their k/v to the server's cache;
fork, truncate, close; Client.attend_sessions steps many sessions in one
call.

Errors are AttnServeError, a grpc.RpcError (when grpcio is installed) with
code() and details();
AttnServeTimeout (also a TimeoutError) for a missed deadline,
AttnServeConnectionError (also a ConnectionError) for an unreachable server.
The protobuf stubs are attnserve.v1.attention_pb2 and attention_pb2_grpc.
"""

from ._version import __version__
from .client import Client, Timing, attend
from .errors import AttnServeConnectionError, AttnServeError, AttnServeTimeout, StatusCode
from .flash_attn import flash_attn_func, flash_attn_varlen_func, set_default_client
from .reference import attention_reference, relative_l2_error, varlen_attention_reference
from .regions import Region, TensorRef
from .sessions import Session, StepResult
from .shared_memory import SystemSharedMemory
from .tensors import BF16, FP16, bf16_bits_to_float, float_to_bf16_bits

__all__ = [
    "AttnServeConnectionError",
    "AttnServeError",
    "AttnServeTimeout",
    "BF16",
    "Client",
    "FP16",
    "Region",
    "Session",
    "StatusCode",
    "StepResult",
    "SystemSharedMemory",
    "TensorRef",
    "Timing",
    "attend",
    "attention_reference",
    "bf16_bits_to_float",
    "flash_attn_func",
    "flash_attn_varlen_func",
    "float_to_bf16_bits",
    "relative_l2_error",
    "set_default_client",
    "varlen_attention_reference",
    "__version__",
]
