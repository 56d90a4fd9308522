// SPDX-License-Identifier: BSD-3-Clause
#include "util/settings.hpp"

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "util/fail.hpp"
#include "util/log.hpp"

extern char** environ;

namespace weft::util {
namespace {

constexpr setting_row rows[] = {
#define WEFT_ATTR(type, name, env, dflt, range, unit, doc) \
  {"runtime", setting_type::type, #name, env, dflt, range, unit, doc, true},
#define WEFT_VAR(scope, type, name, env, dflt, range, unit, doc) \
  {#scope, setting_type::type, #name, env, dflt, range, unit, doc, false},
#include "weft/settings.def"
};
static_assert(sizeof(rows) / sizeof(rows[0]) == size_t(setting::count));

const char* raw(const setting_row& r) {
  const char* s = std::getenv(r.env);
  return (s && *s) ? s : nullptr;
}

// "lo..hi" of a size row; false when the row has no range.
bool size_range(const setting_row& r, size_t* lo, size_t* hi) {
  const char* dots = strstr(r.range, "..");
  if (!dots) return false;
  const std::string a(r.range, size_t(dots - r.range));
  return parse_size(a.c_str(), lo) && parse_size(dots + 2, hi);
}

// "a|b|c" shown as "a, b or c".
std::string choices_text(const char* range) {
  std::string s = range;
  const size_t last = s.rfind('|');
  if (last != std::string::npos) s.replace(last, 1, " or ");
  for (size_t i; (i = s.find('|')) != std::string::npos;) s.replace(i, 1, ", ");
  return s;
}

bool is_choice(const char* range, const std::string& v) {
  for (const char* p = range; *p;) {
    const char* bar = strchr(p, '|');
    const size_t n = bar ? size_t(bar - p) : strlen(p);
    if (v.size() == n && !strncmp(p, v.data(), n)) return true;
    p += n + (bar ? 1 : 0);
  }
  return false;
}

size_t checked_size(const setting_row& r, const char* text, const char* call, const char* arg) {
  size_t v = 0;
  if (!parse_size(text, &v))
    fail(call, arg, text, "expected a non-negative size such as 4096, 64K or 2M");
  size_t lo = 0, hi = 0;
  if (size_range(r, &lo, &hi) && (v < lo || v > hi))
    fail(call, arg, text, std::string("must be ") + r.range);
  return v;
}

bool parse_flag(const char* s, bool* out) {
  for (const char* t : {"1", "true", "yes", "on"})
    if (!strcasecmp(s, t)) return *out = true;
  for (const char* t : {"0", "false", "no", "off"})
    if (!strcasecmp(s, t)) return !(*out = false);
  return false;
}

}  // namespace

std::span<const setting_row> setting_table() {
  return rows;
}

const setting_row& row_of(setting s) {
  return rows[size_t(s)];
}

bool parse_size(const char* s, size_t* out) {
  if (!s || !*s || s[0] == '-' || s[0] == '+' || s[0] == ' ') return false;
  if (s[0] == '2' && s[1] == '^') {
    char* end = nullptr;
    errno = 0;
    const unsigned long e = strtoul(s + 2, &end, 10);
    if (errno || end == s + 2 || *end || e > 63) return false;
    *out = size_t(1) << e;
    return true;
  }
  errno = 0;
  char* end = nullptr;
  const unsigned long long v = strtoull(s, &end, 10);
  if (errno || end == s) return false;
  size_t shift = 0;
  if (*end) {
    switch (*end) {
      case 'k':
      case 'K': shift = 10; break;
      case 'm':
      case 'M': shift = 20; break;
      case 'g':
      case 'G': shift = 30; break;
      default: return false;
    }
    if (end[1] && strcmp(end + 1, "iB") && strcmp(end + 1, "B")) return false;
  }
  if (shift && v > (~0ull >> shift)) return false;
  *out = size_t(v) << shift;
  return true;
}

std::optional<size_t> get_size(setting s) {
  const setting_row& r = row_of(s);
  if (const char* v = raw(r)) return checked_size(r, v, "environment", r.env);
  if (!*r.dflt) return std::nullopt;
  return checked_size(r, r.dflt, "settings.def", r.env);
}

bool get_flag(setting s) {
  const setting_row& r = row_of(s);
  const char* v = raw(r);
  bool b = false;
  if (!parse_flag(v ? v : r.dflt, &b))
    fail("environment", r.env, v ? v : r.dflt, "expected 1/0, true/false, yes/no or on/off");
  return b;
}

std::string get_text(setting s) {
  const setting_row& r = row_of(s);
  const char* v = raw(r);
  std::string t = v ? v : r.dflt;
  if (v && *r.range && !is_choice(r.range, t))
    fail("environment", r.env, t, "must be " + choices_text(r.range));
  return t;
}

bool is_set(setting s) {
  return raw(row_of(s)) != nullptr;
}

std::string current_text(setting s) {
  const setting_row& r = row_of(s);
  const char* v = raw(r);
  return v ? v : r.dflt;
}

const char* current_source(setting s) {
  return is_set(s) ? "environment" : "default";
}

size_t check_given(setting s, size_t v, const char* call, const char* argument) {
  const setting_row& r = row_of(s);
  return checked_size(r, std::to_string(v).c_str(), call, argument ? argument : r.name);
}

std::string closest_setting(const std::string& env) {
  std::string best;
  size_t best_d = 4;
  for (const setting_row& r : rows) {
    const std::string b = r.env;
    std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
    for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
    for (size_t i = 1; i <= env.size(); ++i) {
      cur[0] = i;
      for (size_t j = 1; j <= b.size(); ++j)
        cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (env[i - 1] != b[j - 1])});
      prev.swap(cur);
    }
    if (prev[b.size()] < best_d) best_d = prev[b.size()], best = b;
  }
  return best;
}

void warn_unknown_settings() {
  static std::atomic<bool> done{false};
  if (done.exchange(true)) return;
  for (char** e = environ; e && *e; ++e) {
    if (strncmp(*e, "WEFT_", 5)) continue;
    const char* eq = strchr(*e, '=');
    const std::string name(*e, eq ? size_t(eq - *e) : strlen(*e));
    bool known = false;
    for (const setting_row& r : rows) known = known || name == r.env;
    if (known) continue;
    const std::string near = closest_setting(name);
    WEFT_LOG(warn, "%s is set but Weft has no such setting%s%s%s (weft-info lists them all)",
             name.c_str(), near.empty() ? "" : "; did you mean ", near.c_str(),
             near.empty() ? "" : "?");
  }
}

const char* env_raw(const char* name) {
  return std::getenv(name);
}

std::string env_or(const char* name, const char* fallback) {
  const char* s = std::getenv(name);
  return (s && *s) ? s : fallback;
}

}  // namespace weft::util
