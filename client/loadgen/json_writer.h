// A minimal streaming JSON writer (objects, arrays, strings, numbers, bools)
// for attn_loadgen's reports; the project has no JSON library dependency.
// Output is indented two spaces per level. Non-finite numbers become null.
#ifndef ATTN_CLIENT_LOADGEN_JSON_WRITER_H_
#define ATTN_CLIENT_LOADGEN_JSON_WRITER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace attn::loadgen {

class JsonWriter {
 public:
  // Containers. Inside an object, call Key() before each value.
  void BeginObject();
  void EndObject();
  void BeginArray();
  void EndArray();
  JsonWriter& Key(absl::string_view key);

  void String(absl::string_view value);
  void Number(double value);
  void Int(int64_t value);
  void Bool(bool value);
  void Null();

  // Key(key) followed by the value.
  void Field(absl::string_view key, absl::string_view value) { Key(key).String(value); }
  void Field(absl::string_view key, const char* value) { Key(key).String(value); }
  void Field(absl::string_view key, double value) { Key(key).Number(value); }
  void Field(absl::string_view key, int64_t value) { Key(key).Int(value); }
  void Field(absl::string_view key, int value) { Key(key).Int(value); }
  void Field(absl::string_view key, bool value) { Key(key).Bool(value); }

  // The document so far (complete once every container is closed).
  const std::string& str() const { return out_; }

  // `value` as a JSON string literal, quotes included.
  static std::string Quote(absl::string_view value);

 private:
  // Separator and indentation before a value or key.
  void BeforeValue();
  void Newline();

  std::string out_;
  // One entry per open container: whether it already has an element.
  std::vector<bool> has_element_;
  bool after_key_ = false;
};

}  // namespace attn::loadgen

#endif  // ATTN_CLIENT_LOADGEN_JSON_WRITER_H_
