// fuzz/npy_fuzzer.cc
//
// The client's .npy reader (client/src/npy.cc) on arbitrary file contents:
// ParseNpy, then TensorFromNpy as ReadTensorNpy applies it (with and
// without a dtype to convert to, with and without packed 3-D tensors).
//
// Asserted, for every input:
//   1. every refusal is INVALID_ARGUMENT with a message (and nothing else
//      happens: no overflow, no read past the contents);
//   2. an accepted file round-trips: SerializeNpy of its descr, shape and
//      data parses back to the same descr, shape and data;
//   3. a tensor read from it has 2-byte elements, one per element of its
//      4-D shape (a count that fits in int64), and the dtype asked for.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "attn/client/npy.h"
#include "fuzz_check.h"

namespace {

void CheckRefusal(const absl::Status& status) {
  FUZZ_CHECK(status.code() == absl::StatusCode::kInvalidArgument, "%s",
             status.ToString().c_str());
  FUZZ_CHECK(!status.message().empty(), "a refusal without a message");
}

void CheckTensor(const attn::NpyArray& array, std::optional<attn::DType> want, bool packed) {
  absl::StatusOr<attn::NpyTensor> tensor = attn::TensorFromNpy(array, want, packed);
  if (!tensor.ok()) {
    CheckRefusal(tensor.status());
    return;
  }
  FUZZ_CHECK(!want.has_value() || tensor->dtype == *want, "asked for one dtype, got another");
  FUZZ_CHECK(tensor->packed == (packed && array.shape.size() == 3), "packed");
  const attn::Shape& s = tensor->shape;
  int64_t elements = 1;
  for (int64_t dim : {s.batch, s.seq_len, s.num_heads, s.head_dim}) {
    FUZZ_CHECK(dim >= 0 && !__builtin_mul_overflow(elements, dim, &elements),
               "shape [%lld, %lld, %lld, %lld] has no element count",
               static_cast<long long>(s.batch), static_cast<long long>(s.seq_len),
               static_cast<long long>(s.num_heads), static_cast<long long>(s.head_dim));
  }
  FUZZ_CHECK(static_cast<int64_t>(tensor->bytes.size()) == elements * 2,
             "%zu bytes for %lld elements", tensor->bytes.size(),
             static_cast<long long>(elements));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view contents(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<attn::NpyArray> array = attn::ParseNpy(contents);
  if (!array.ok()) {
    CheckRefusal(array.status());
    return 0;
  }

  // 2. Round trip (SerializeNpy quotes descr with ''; one holding a quote
  // cannot be written back).
  if (array->descr.find('\'') == std::string::npos) {
    absl::StatusOr<attn::NpyArray> again =
        attn::ParseNpy(attn::SerializeNpy(array->descr, array->shape, array->data));
    FUZZ_CHECK(again.ok(), "%s", again.status().ToString().c_str());
    FUZZ_CHECK(again->descr == array->descr, "descr");
    FUZZ_CHECK(again->shape == array->shape, "shape");
    FUZZ_CHECK(again->data == array->data, "data");
  }

  // 3. As a tensor.
  for (bool packed : {false, true}) {
    CheckTensor(*array, std::nullopt, packed);
    CheckTensor(*array, attn::DType::kBFloat16, packed);
    CheckTensor(*array, attn::DType::kFloat16, packed);
  }
  return 0;
}
