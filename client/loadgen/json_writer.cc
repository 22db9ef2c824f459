#include "json_writer.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace attn::loadgen {

std::string JsonWriter::Quote(absl::string_view value) {
  std::string out = "\"";
  for (char c : value) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          absl::StrAppendFormat(&out, "\\u%04x", static_cast<unsigned char>(c));
        } else {
          out.push_back(c);
        }
    }
  }
  out += "\"";
  return out;
}

void JsonWriter::Newline() {
  out_ += "\n";
  out_.append(2 * has_element_.size(), ' ');
}

void JsonWriter::BeforeValue() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (!has_element_.empty()) {
    if (has_element_.back()) out_ += ",";
    has_element_.back() = true;
    Newline();
  }
}

JsonWriter& JsonWriter::Key(absl::string_view key) {
  BeforeValue();
  out_ += Quote(key);
  out_ += ": ";
  after_key_ = true;
  return *this;
}

void JsonWriter::BeginObject() {
  BeforeValue();
  out_ += "{";
  has_element_.push_back(false);
}

void JsonWriter::EndObject() {
  const bool any = has_element_.back();
  has_element_.pop_back();
  if (any) Newline();
  out_ += "}";
  if (has_element_.empty()) out_ += "\n";
}

void JsonWriter::BeginArray() {
  BeforeValue();
  out_ += "[";
  has_element_.push_back(false);
}

void JsonWriter::EndArray() {
  const bool any = has_element_.back();
  has_element_.pop_back();
  if (any) Newline();
  out_ += "]";
}

void JsonWriter::String(absl::string_view value) {
  BeforeValue();
  out_ += Quote(value);
}

void JsonWriter::Number(double value) {
  BeforeValue();
  if (!std::isfinite(value)) {
    out_ += "null";
    return;
  }
  // Up to 9 significant digits: more than any measurement here carries.
  absl::StrAppendFormat(&out_, "%.9g", value);
}

void JsonWriter::Int(int64_t value) {
  BeforeValue();
  absl::StrAppend(&out_, value);
}

void JsonWriter::Bool(bool value) {
  BeforeValue();
  out_ += value ? "true" : "false";
}

void JsonWriter::Null() {
  BeforeValue();
  out_ += "null";
}

}  // namespace attn::loadgen
