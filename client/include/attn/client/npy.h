// attn/client/npy.h
//
// Reading and writing NumPy .npy files (format versions 1.0, 2.0 and 3.0),
// so tensors move between attnserve's tools and Python without conversion
// scripts.
//
// How Python writes 16-bit floats:
//   * float16: NumPy's own dtype, descr '<f2'.
//   * bfloat16: NumPy has none; ml_dtypes (JAX, TensorFlow, Keras) registers
//     one whose type code is the raw 2-byte void 'V', so np.save writes descr
//     '<V2' and np.load returns a void array (ml_dtypes issue #41); view it
//     with .view(ml_dtypes.bfloat16). Some tools write the dtype's name,
//     'bfloat16', instead. Both are read as bf16 here, and bf16 tensors are
//     written as '<V2', exactly what np.save of an ml_dtypes array writes.
//   * PyTorch users often save raw bits (.view(torch.int16).numpy(),
//     '<i2'/'<u2'); those are accepted when the caller names the dtype.
//   * float32/float64 arrays are converted (round to nearest even) to the
//     dtype the caller names.
// Only C-order (not Fortran-order) arrays are read.
//
// Hand-written because no maintained C++ .npy library reads bf16: cnpy and
// libnpy know NumPy's own type codes only, and the 'V2'/'bfloat16' spellings
// above are what bf16 files actually carry.
#ifndef ATTN_CLIENT_NPY_H_
#define ATTN_CLIENT_NPY_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "attn/dtype.h"
#include "attn/tensor.h"

namespace attn {

// A parsed .npy file.
struct NpyArray {
  std::string descr;  // the header's descr, e.g. "<f2"
  bool fortran_order = false;
  std::vector<int64_t> shape;
  std::string data;  // the element bytes as stored
};

// Parses the contents of a .npy file. INVALID_ARGUMENT for anything that is
// not a well-formed .npy of a simple (non-structured) dtype, or whose data
// size disagrees with descr and shape.
absl::StatusOr<NpyArray> ParseNpy(absl::string_view contents);
absl::StatusOr<NpyArray> ReadNpyFile(const std::string& path);

// A version 1.0 .npy file (header padded to 64 bytes, as NumPy does).
std::string SerializeNpy(absl::string_view descr, const std::vector<int64_t>& shape,
                         absl::string_view data);

// An attention tensor read from .npy: 16-bit elements, little-endian, in
// [batch, seq_len, num_heads, head_dim] order. A 3-D file (packed varlen
// tokens, [total, num_heads, head_dim]) reads as shape [1, total, H, D] with
// `packed` set.
struct NpyTensor {
  DType dtype = DType::kBFloat16;
  Shape shape;
  bool packed = false;
  std::string bytes;
};

// Reads a 4-D [B, S, H, D] tensor (or, with `allow_packed`, also a 3-D
// [total, H, D] one). The file's dtype decides when it is
// 16-bit float ('<f2' is fp16, '<V2'/'|V2'/'bfloat16' is bf16); `want`, when
// set, must then agree. Float32/float64 and raw 16-bit integer bits need
// `want`. Big-endian files are byte-swapped. INVALID_ARGUMENT names the file
// and the problem.
absl::StatusOr<NpyTensor> ReadTensorNpy(const std::string& path, std::optional<DType> want,
                                        bool allow_packed = false);
// The same for an array as ParseNpy returns it (data sized by descr and
// shape); the messages do not name a file.
absl::StatusOr<NpyTensor> TensorFromNpy(NpyArray array, std::optional<DType> want,
                                        bool allow_packed = false);

// Writes a [B, S, H, D] tensor of 16-bit elements: fp16 as '<f2', bf16 as
// '<V2'. `bytes` must hold shape.NumElements() * 2 bytes.
absl::Status WriteTensorNpy(const std::string& path, DType dtype, const Shape& shape,
                            absl::string_view bytes);

// Writes 16-bit elements of any shape `dims` (e.g. a packed [total, H, D]
// varlen output) the same way.
absl::Status WriteTensorNpyDims(const std::string& path, DType dtype,
                                const std::vector<int64_t>& dims, absl::string_view bytes);

// Writes float32 values ('<f4') of shape `dims`, e.g. an LSE [B, H, S].
absl::Status WriteFloat32Npy(const std::string& path, const std::vector<int64_t>& dims,
                             const std::vector<float>& values);

}  // namespace attn

#endif  // ATTN_CLIENT_NPY_H_
