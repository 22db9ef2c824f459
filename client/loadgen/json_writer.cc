#include "json_writer.h"

#include <cmath>
#include <utility>

namespace attn::loadgen {

using nlohmann::ordered_json;

ordered_json* JsonWriter::Add(ordered_json value) {
  if (open_.empty()) {
    root_ = std::move(value);
    return &root_;
  }
  ordered_json& container = *open_.back();
  if (container.is_array()) {
    container.push_back(std::move(value));
    return &container.back();
  }
  ordered_json& slot = container[key_];
  slot = std::move(value);
  return &slot;
}

void JsonWriter::BeginObject() { open_.push_back(Add(ordered_json::object())); }
void JsonWriter::BeginArray() { open_.push_back(Add(ordered_json::array())); }
void JsonWriter::EndObject() { open_.pop_back(); }
void JsonWriter::EndArray() { open_.pop_back(); }

JsonWriter& JsonWriter::Key(absl::string_view key) {
  key_.assign(key.data(), key.size());
  return *this;
}

void JsonWriter::String(absl::string_view value) { Add(std::string(value)); }
void JsonWriter::Number(double value) {
  Add(std::isfinite(value) ? ordered_json(value) : ordered_json(nullptr));
}
void JsonWriter::Int(int64_t value) { Add(value); }
void JsonWriter::Bool(bool value) { Add(value); }
void JsonWriter::Null() { Add(nullptr); }

std::string JsonWriter::str() const {
  return root_.dump(2, ' ', /*ensure_ascii=*/false, ordered_json::error_handler_t::replace) +
         "\n";
}

}  // namespace attn::loadgen
