// The text of a spec enum's values (proto/vocabulary.proto), for flags, rows
// and messages: the value's proto name with an underscore written as a hyphen
// ("fake_device" is "fake-device"). Flags parse through here, so a flag's
// choices are the enum's values and nothing else.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <google/protobuf/generated_enum_reflection.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"

namespace testbed {

template <typename Enum>
std::string EnumText(Enum value) {
  const google::protobuf::EnumValueDescriptor* v =
      google::protobuf::GetEnumDescriptor<Enum>()->FindValueByNumber(value);
  return v == nullptr ? std::to_string(static_cast<int>(value))
                      : absl::StrReplaceAll(v->name(), {{"_", "-"}});
}

template <typename Enum>
std::optional<Enum> ParseEnumText(std::string_view text) {
  const google::protobuf::EnumValueDescriptor* v =
      google::protobuf::GetEnumDescriptor<Enum>()->FindValueByName(
          absl::StrReplaceAll(std::string(text), {{"-", "_"}}));
  if (v == nullptr) return std::nullopt;
  return static_cast<Enum>(v->number());
}

// "float32, float64, int32, float16": every value, in declaration order.
template <typename Enum>
std::string EnumTexts() {
  const google::protobuf::EnumDescriptor* e = google::protobuf::GetEnumDescriptor<Enum>();
  std::string out;
  for (int i = 0; i < e->value_count(); ++i) {
    absl::StrAppend(&out, i == 0 ? "" : ", ",
                    absl::StrReplaceAll(e->value(i)->name(), {{"_", "-"}}));
  }
  return out;
}

}  // namespace testbed
