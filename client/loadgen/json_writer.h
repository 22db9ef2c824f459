// A streaming facade over nlohmann-json for attn_loadgen's reports: calls
// in document order (Begin/End, Key, values) build an ordered_json, and str()
// dumps it. The library does the encoding: escaping, UTF-8 (bytes that are
// not UTF-8, e.g. from a --label, become U+FFFD, so the output is always
// valid JSON) and numbers. Output is indented two spaces per level; keys keep
// their insertion order; non-finite numbers become null.
#ifndef ATTN_CLIENT_LOADGEN_JSON_WRITER_H_
#define ATTN_CLIENT_LOADGEN_JSON_WRITER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace attn::loadgen {

class JsonWriter {
 public:
  JsonWriter() = default;
  JsonWriter(const JsonWriter&) = delete;
  JsonWriter& operator=(const JsonWriter&) = delete;

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

  // The document, with a final newline (complete once every container is
  // closed).
  std::string str() const;

 private:
  // Adds `value` to the open container (under the pending key in an object)
  // and returns where it now lives.
  nlohmann::ordered_json* Add(nlohmann::ordered_json value);

  nlohmann::ordered_json root_;
  // The open containers, outermost first. Only the innermost one grows, so
  // the pointers to its ancestors stay valid.
  std::vector<nlohmann::ordered_json*> open_;
  std::string key_;
};

}  // namespace attn::loadgen

#endif  // ATTN_CLIENT_LOADGEN_JSON_WRITER_H_
