#include "attn/client/npy.h"

#include <cctype>
#include <cstring>
#include <limits>
#include <optional>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "file_io.h"

namespace attn {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicSize = 6;
// NumPy pads headers so the data starts on a 64-byte boundary.
constexpr size_t kHeaderAlign = 64;

// A cursor over the header's Python dict literal, e.g.
// {'descr': '<f2', 'fortran_order': False, 'shape': (1, 2, 3, 4), }
class HeaderParser {
 public:
  explicit HeaderParser(absl::string_view text) : text_(text) {}

  absl::Status Parse(NpyArray* array) {
    bool have_descr = false, have_order = false, have_shape = false;
    if (!Consume('{')) return Error("expected '{'");
    while (true) {
      SkipSpace();
      if (Consume('}')) break;
      std::string key;
      if (!ParseString(&key)) return Error("expected a quoted key");
      if (!Consume(':')) return Error(absl::StrCat("expected ':' after '", key, "'"));
      if (key == "descr") {
        SkipSpace();
        if (Peek() == '[') return Error("structured dtypes are not supported");
        if (!ParseString(&array->descr)) return Error("descr is not a string");
        have_descr = true;
      } else if (key == "fortran_order") {
        if (!ParseBool(&array->fortran_order)) return Error("fortran_order is not a bool");
        have_order = true;
      } else if (key == "shape") {
        if (!ParseTuple(&array->shape)) return Error("shape is not a tuple of integers");
        have_shape = true;
      } else {
        return Error(absl::StrCat("unexpected key '", key, "'"));
      }
      SkipSpace();
      if (Consume(',')) continue;
      SkipSpace();
      if (Consume('}')) break;
      return Error("expected ',' or '}'");
    }
    if (!have_descr || !have_order || !have_shape) {
      return Error("the header must have 'descr', 'fortran_order' and 'shape'");
    }
    return absl::OkStatus();
  }

 private:
  absl::Status Error(absl::string_view what) const {
    return absl::InvalidArgumentError(
        absl::StrCat("malformed .npy header at byte ", pos_, ": ", what));
  }
  char Peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
  void SkipSpace() {
    while (pos_ < text_.size() && absl::ascii_isspace(static_cast<unsigned char>(text_[pos_]))) {
      ++pos_;
    }
  }
  bool Consume(char c) {
    SkipSpace();
    if (Peek() != c) return false;
    ++pos_;
    return true;
  }
  bool ConsumeWord(absl::string_view word) {
    SkipSpace();
    if (text_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }
  bool ParseString(std::string* out) {
    SkipSpace();
    const char quote = Peek();
    if (quote != '\'' && quote != '"') return false;
    const size_t end = text_.find(quote, pos_ + 1);
    if (end == absl::string_view::npos) return false;
    *out = std::string(text_.substr(pos_ + 1, end - pos_ - 1));
    pos_ = end + 1;
    return true;
  }
  bool ParseBool(bool* out) {
    if (ConsumeWord("True")) {
      *out = true;
      return true;
    }
    if (ConsumeWord("False")) {
      *out = false;
      return true;
    }
    return false;
  }
  bool ParseTuple(std::vector<int64_t>* out) {
    out->clear();
    if (!Consume('(')) return false;
    while (true) {
      if (Consume(')')) return true;
      SkipSpace();
      const size_t start = pos_;
      while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) ++pos_;
      // Python 2 era files may write longs as "3L".
      const absl::string_view digits = text_.substr(start, pos_ - start);
      if (Peek() == 'L') ++pos_;
      int64_t value;
      if (!absl::SimpleAtoi(digits, &value)) return false;
      out->push_back(value);
      if (Consume(',')) continue;
      if (Consume(')')) return true;
      return false;
    }
  }

  absl::string_view text_;
  size_t pos_ = 0;
};

// Byte order, kind and item size of a simple descr such as "<f2" or "|V2".
struct Descr {
  char byte_order = '<';
  char kind = 0;
  int64_t item_size = 0;
};

bool ParseDescr(absl::string_view descr, Descr* out) {
  if (descr == "bfloat16") {  // the dtype's name, as some tools write it
    *out = Descr{'<', 'V', 2};
    return true;
  }
  if (!descr.empty() && (descr[0] == '<' || descr[0] == '>' || descr[0] == '|' ||
                         descr[0] == '=')) {
    out->byte_order = descr[0];
    descr.remove_prefix(1);
  } else {
    out->byte_order = '=';
  }
  if (descr.size() < 2) return false;
  out->kind = descr[0];
  return absl::SimpleAtoi(descr.substr(1), &out->item_size) && out->item_size > 0;
}

bool BigEndian(const Descr& d) { return d.byte_order == '>' && d.item_size > 1; }

// Bytes of data `shape` holds in items of `item_size` bytes; nullopt when
// that is 2^63 or more (a header can name any dimensions).
std::optional<int64_t> DataBytes(const std::vector<int64_t>& shape, int64_t item_size) {
  for (int64_t dim : shape) {
    if (dim == 0) return 0;
  }
  int64_t bytes = item_size;
  for (int64_t dim : shape) {
    if (bytes > std::numeric_limits<int64_t>::max() / dim) return std::nullopt;
    bytes *= dim;
  }
  return bytes;
}

void SwapBytes(std::string* data, int64_t item_size) {
  const size_t size = static_cast<size_t>(item_size);
  for (size_t i = 0; i + size <= data->size(); i += size) {
    for (size_t a = i, b = i + size - 1; a < b; ++a, --b) std::swap((*data)[a], (*data)[b]);
  }
}

std::string ShapeTuple(const std::vector<int64_t>& shape) {
  if (shape.size() == 1) return absl::StrCat("(", shape[0], ",)");
  return absl::StrCat("(", absl::StrJoin(shape, ", "), ")");
}

template <typename Float>
void ConvertFloats(const std::string& data, DType dtype, std::string* out) {
  const size_t n = data.size() / sizeof(Float);
  out->resize(n * DTypeSize(dtype));
  for (size_t i = 0; i < n; ++i) {
    Float value;
    std::memcpy(&value, data.data() + i * sizeof(Float), sizeof(Float));
    const uint16_t bits = FloatToBits(static_cast<float>(value), dtype);
    std::memcpy(out->data() + i * 2, &bits, 2);
  }
}

}  // namespace

absl::StatusOr<NpyArray> ParseNpy(absl::string_view contents) {
  if (contents.size() < kMagicSize + 4 || contents.substr(0, kMagicSize) != kMagic) {
    return absl::InvalidArgumentError("not a .npy file (no \\x93NUMPY magic)");
  }
  const int major = static_cast<unsigned char>(contents[6]);
  size_t header_len = 0, header_start = 0;
  if (major == 1) {
    header_len = static_cast<unsigned char>(contents[8]) |
                 (static_cast<size_t>(static_cast<unsigned char>(contents[9])) << 8);
    header_start = 10;
  } else if (major == 2 || major == 3) {
    if (contents.size() < 12) return absl::InvalidArgumentError("truncated .npy header");
    for (int i = 3; i >= 0; --i) {
      header_len = (header_len << 8) | static_cast<unsigned char>(contents[8 + i]);
    }
    header_start = 12;
  } else {
    return absl::InvalidArgumentError(absl::StrCat("unsupported .npy format version ", major));
  }
  if (contents.size() < header_start + header_len) {
    return absl::InvalidArgumentError("truncated .npy header");
  }
  NpyArray array;
  HeaderParser parser(contents.substr(header_start, header_len));
  if (absl::Status s = parser.Parse(&array); !s.ok()) return s;

  Descr descr;
  if (!ParseDescr(array.descr, &descr)) {
    return absl::InvalidArgumentError(absl::StrCat("unsupported .npy dtype '", array.descr, "'"));
  }
  const std::optional<int64_t> expected = DataBytes(array.shape, descr.item_size);
  const absl::string_view data = contents.substr(header_start + header_len);
  if (!expected.has_value() || static_cast<int64_t>(data.size()) != *expected) {
    return absl::InvalidArgumentError(absl::StrCat(
        ".npy data has ", data.size(), " bytes; dtype '", array.descr, "' and shape ",
        ShapeTuple(array.shape), " need ",
        expected.has_value() ? absl::StrCat(*expected) : "2^63 or more"));
  }
  array.data = std::string(data);
  return array;
}

absl::StatusOr<NpyArray> ReadNpyFile(const std::string& path) {
  absl::StatusOr<std::string> contents = internal::ReadWholeFile(path);
  if (!contents.ok()) return contents.status();
  absl::StatusOr<NpyArray> array = ParseNpy(*contents);
  if (!array.ok()) {
    return absl::Status(array.status().code(),
                        absl::StrCat(path, ": ", array.status().message()));
  }
  return array;
}

std::string SerializeNpy(absl::string_view descr, const std::vector<int64_t>& shape,
                         absl::string_view data) {
  std::string header = absl::StrCat("{'descr': '", descr,
                                    "', 'fortran_order': False, 'shape': ", ShapeTuple(shape),
                                    ", }");
  // Pad with spaces so magic + version + length + header + '\n' is a
  // multiple of 64 bytes.
  const size_t prefix = kMagicSize + 2 + 2;
  const size_t total = prefix + header.size() + 1;
  header.append((kHeaderAlign - total % kHeaderAlign) % kHeaderAlign, ' ');
  header.push_back('\n');

  std::string out(kMagic, kMagicSize);
  out.push_back('\x01');
  out.push_back('\x00');
  out.push_back(static_cast<char>(header.size() & 0xff));
  out.push_back(static_cast<char>((header.size() >> 8) & 0xff));
  out += header;
  out.append(data.data(), data.size());
  return out;
}

absl::StatusOr<NpyTensor> TensorFromNpy(NpyArray array, std::optional<DType> want,
                                        bool allow_packed) {
  auto error = [](absl::string_view what) { return absl::InvalidArgumentError(what); };
  if (array.fortran_order) {
    return error("Fortran-order array; save a C-order one (np.ascontiguousarray)");
  }
  const bool packed = allow_packed && array.shape.size() == 3;
  if (array.shape.size() != 4 && !packed) {
    return error(absl::StrCat("shape ", ShapeTuple(array.shape),
                              " is not 4-D [batch, seq_len, num_heads, head_dim]",
                              allow_packed ? " or 3-D [total_tokens, num_heads, head_dim]" : ""));
  }
  if (packed) array.shape.insert(array.shape.begin(), 1);
  // Shape::NumElements multiplies batch * seq_len * num_heads * head_dim in
  // int64: every partial product must fit, even where a later 0 makes the
  // array empty.
  int64_t elements = 1;
  for (int64_t dim : array.shape) {
    if (dim != 0 && elements > std::numeric_limits<int64_t>::max() / dim) {
      return error(absl::StrCat("shape ", ShapeTuple(array.shape),
                                " has too many elements to count in 64 bits"));
    }
    elements *= dim;
  }
  Descr descr;
  if (!ParseDescr(array.descr, &descr)) {
    return error(absl::StrCat("unsupported .npy dtype '", array.descr, "'"));
  }
  if (BigEndian(descr)) SwapBytes(&array.data, descr.item_size);

  NpyTensor tensor;
  tensor.shape = Shape{array.shape[0], array.shape[1], array.shape[2], array.shape[3]};
  tensor.packed = packed;
  const bool is_fp16 = descr.kind == 'f' && descr.item_size == 2;
  const bool is_bf16 = descr.kind == 'V' && descr.item_size == 2;
  if (is_fp16 || is_bf16) {
    tensor.dtype = is_fp16 ? DType::kFloat16 : DType::kBFloat16;
    if (want.has_value() && *want != tensor.dtype) {
      return error(absl::StrCat("holds ", DTypeName(tensor.dtype), " ('", array.descr,
                                "') but ", DTypeName(*want), " was asked for"));
    }
    tensor.bytes = std::move(array.data);
    return tensor;
  }
  if (!want.has_value()) {
    return error(absl::StrCat("dtype '", array.descr,
                              "' is not fp16 or bf16; name the dtype to convert to"));
  }
  tensor.dtype = *want;
  if (descr.kind == 'f' && descr.item_size == 4) {
    ConvertFloats<float>(array.data, tensor.dtype, &tensor.bytes);
  } else if (descr.kind == 'f' && descr.item_size == 8) {
    ConvertFloats<double>(array.data, tensor.dtype, &tensor.bytes);
  } else if ((descr.kind == 'i' || descr.kind == 'u') && descr.item_size == 2) {
    tensor.bytes = std::move(array.data);  // raw 16-bit patterns
  } else {
    return error(absl::StrCat("unsupported dtype '", array.descr,
                              "' (use float16, bfloat16, float32, float64 or 16-bit bits)"));
  }
  return tensor;
}

absl::StatusOr<NpyTensor> ReadTensorNpy(const std::string& path, std::optional<DType> want,
                                        bool allow_packed) {
  absl::StatusOr<NpyArray> array = ReadNpyFile(path);
  if (!array.ok()) return array.status();
  absl::StatusOr<NpyTensor> tensor = TensorFromNpy(*std::move(array), want, allow_packed);
  if (!tensor.ok()) {
    return absl::Status(tensor.status().code(),
                        absl::StrCat(path, ": ", tensor.status().message()));
  }
  return tensor;
}

namespace {

int64_t Product(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

}  // namespace

absl::Status WriteTensorNpy(const std::string& path, DType dtype, const Shape& shape,
                            absl::string_view bytes) {
  return WriteTensorNpyDims(path, dtype,
                            {shape.batch, shape.seq_len, shape.num_heads, shape.head_dim}, bytes);
}

absl::Status WriteTensorNpyDims(const std::string& path, DType dtype,
                                const std::vector<int64_t>& dims, absl::string_view bytes) {
  if (static_cast<int64_t>(bytes.size()) != Product(dims) * 2) {
    return absl::InvalidArgumentError(absl::StrCat("tensor has ", bytes.size(),
                                                   " bytes; shape ", ShapeTuple(dims), " needs ",
                                                   Product(dims) * 2));
  }
  return internal::WriteWholeFile(
      path, SerializeNpy(dtype == DType::kFloat16 ? "<f2" : "<V2", dims, bytes));
}

absl::Status WriteFloat32Npy(const std::string& path, const std::vector<int64_t>& dims,
                             const std::vector<float>& values) {
  if (static_cast<int64_t>(values.size()) != Product(dims)) {
    return absl::InvalidArgumentError(absl::StrCat(values.size(), " float32 values; shape ",
                                                   ShapeTuple(dims), " needs ", Product(dims)));
  }
  return internal::WriteWholeFile(path, SerializeNpy("<f4", dims,
                                      absl::string_view(reinterpret_cast<const char*>(values.data()),
                                                        values.size() * sizeof(float))));
}

}  // namespace attn
