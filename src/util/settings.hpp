// SPDX-License-Identifier: BSD-3-Clause
// Settings: the rows of include/weft/settings.def, read from the environment. Every
// WEFT_* variable is read here and nowhere else, parsed by its row's type, checked against
// its row's range, and a set WEFT_* variable that no row names is reported (once per
// process, with the closest known name), so a misspelling is not ignored in silence.
// Other programs' variables (PMI_FD, UCX_TLS) are read through env_raw, also here only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

namespace weft::util {

enum class setting : int {
#define WEFT_ATTR(type, name, ...) name,
#define WEFT_VAR(scope, type, name, ...) name,
#include "weft/settings.def"
  count
};

enum class setting_type : uint8_t { size, flag, text };

struct setting_row {
  const char* scope;  // "runtime" for attributes; else the layer that reads it
  setting_type type;
  const char* name;   // the attribute or the identifier in `setting`
  const char* env;    // WEFT_...
  const char* dflt;   // "" when the code decides
  const char* range;  // lo..hi, a|b|c, or ""
  const char* unit;
  const char* doc;
  bool attribute;  // a runtime attribute (an _x setter and get_attr_ getter)
};

// All rows, in the order of settings.def.
std::span<const setting_row> setting_table();
const setting_row& row_of(setting s);

// The environment's value, else the row's default; a value that does not parse or lies
// outside the row's range is a fatal_error naming the variable. get_size of a row whose
// default the code decides returns nullopt when the variable is unset.
std::optional<size_t> get_size(setting s);
bool get_flag(setting s);
std::string get_text(setting s);
// Whether the variable is set (non-empty).
bool is_set(setting s);
// The text a setting has now ("" when unset with no default) and where that came from.
std::string current_text(setting s);
const char* current_source(setting s);  // "environment" or "default"

// A value given by a call (an _x argument) for an attribute row, checked against the same
// range as the environment's; the error names the call and the argument (the attribute's
// own name unless `argument` says the call spells it otherwise).
size_t check_given(setting s, size_t v, const char* call, const char* argument = nullptr);

// Parses a size the way the environment's are read (4096, 64K, 2M, 2^20); false on garbage.
bool parse_size(const char* text, size_t* out);

// Names every set WEFT_* variable that no row has, with the closest row's name; once.
void warn_unknown_settings();
// The row name nearest to `env` by edit distance ("" when none is within 3 edits).
std::string closest_setting(const std::string& env);

// Other programs' variables: the value, or nullptr when unset; or `fallback` when unset or
// empty.
const char* env_raw(const char* name);
std::string env_or(const char* name, const char* fallback);

}  // namespace weft::util
