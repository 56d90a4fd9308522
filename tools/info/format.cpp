// SPDX-License-Identifier: BSD-3-Clause
#include "format.hpp"

#include <cstring>
#include <string>

#include "info/info.hpp"
#include "util/settings.hpp"

namespace weft_info {
namespace {

using weft::util::setting_row;
using weft::util::setting_type;

// Headings of the scopes, in the order the document lists them.
struct scope_title {
  const char* scope;
  const char* title;
};
constexpr scope_title scopes[] = {
    {"runtime", "Runtime attributes"},
    {"backend", "Backend"},
    {"shm", "Shared-memory transport"},
    {"ofi", "libfabric (ofi)"},
    {"ucx", "UCX"},
    {"engine", "Communication engine (weft/engine.h)"},
    {"bootstrap", "Bootstrap"},
    {"util", "Diagnostics"},
    {"core", "Counters"},
    {"weftrun", "Set by weftrun for each rank (not meant to be set by hand)"},
    {"test", "Test builds only"},
};

const char* type_name(setting_type t) {
  return t == setting_type::size ? "size" : t == setting_type::flag ? "flag" : "text";
}

std::string json_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      snprintf(buf, sizeof(buf), "\\u%04x", c);
      o += buf;
      continue;
    }
    o += c;
  }
  return o;
}

void json_findings(FILE* out, const std::vector<weft::info::finding>& f) {
  fprintf(out, "{");
  for (size_t i = 0; i < f.size(); ++i)
    fprintf(out, "%s\"%s\": \"%s\"", i ? ", " : "", json_escape(f[i].item).c_str(),
            json_escape(f[i].value).c_str());
  fprintf(out, "}");
}

std::string md_cell(const char* text) {
  std::string o;
  for (const char* c = text; *c; ++c) {
    if (*c == '|') o.push_back('\\');
    o.push_back(*c);
  }
  return o;
}

// The text a row shows as its default: "" stands for "the code decides".
std::string shown_default(const setting_row& r) {
  return *r.dflt ? r.dflt : "(see meaning)";
}

}  // namespace

void print_settings_markdown(FILE* out) {
  for (const scope_title& sc : scopes) {
    fprintf(out, "### %s\n\n", sc.title);
    const bool attr = !strcmp(sc.scope, "runtime");
    fprintf(out, attr ? "| variable | attribute | type | default | range | meaning |\n"
                        "| --- | --- | --- | --- | --- | --- |\n"
                      : "| variable | type | default | range | meaning |\n"
                        "| --- | --- | --- | --- | --- |\n");
    for (const setting_row& r : weft::util::setting_table()) {
      if (strcmp(r.scope, sc.scope)) continue;
      fprintf(out, "| `%s` |", r.env);
      if (attr) fprintf(out, " `%s` |", r.name);
      // A | inside a table cell ends the cell, even in a code span: escaped.
      // Appended piece by piece: GCC 12 warns (-Wrestrict) on a chain of + here at -O3.
      std::string range;
      if (*r.range) range.append("`").append(md_cell(r.range)).append("`");
      if (*r.unit) range.append(range.empty() ? "" : " ").append(r.unit);
      fprintf(out, " %s | %s | %s | %s |\n", type_name(r.type), shown_default(r).c_str(),
              range.c_str(), md_cell(r.doc).c_str());
    }
    fprintf(out, "\n");
  }
}

void print_text(FILE* out) {
  fprintf(out, "Build\n");
  for (const auto& f : weft::info::build())
    fprintf(out, "  %-34s %s\n", f.item.c_str(), f.value.c_str());
  fprintf(out, "\nBackends\n");
  for (const auto& b : weft::info::backends()) {
    fprintf(out, "  %-34s %s\n", b.name.c_str(),
            b.built ? "built in" : ("not built: needs " + b.needs).c_str());
    for (const auto& f : b.found) fprintf(out, "    %-32s %s\n", f.item.c_str(), f.value.c_str());
  }
  fprintf(out, "\nSettings (value now, and where it came from)\n");
  for (int i = 0; i < int(weft::util::setting::count); ++i) {
    const auto s = weft::util::setting(i);
    const setting_row& r = weft::util::row_of(s);
    const std::string now = weft::util::current_text(s);
    const bool from_env = weft::util::is_set(s);
    fprintf(out, "  %-28s %-10s %-16s %s%s%s\n", r.env, r.scope, now.empty() ? "-" : now.c_str(),
            weft::util::current_source(s), from_env ? "; default " : "",
            from_env ? shown_default(r).c_str() : "");
  }
}

void print_json(FILE* out) {
  fprintf(out, "{\n  \"build\": ");
  json_findings(out, weft::info::build());
  fprintf(out, ",\n  \"backends\": [");
  bool first = true;
  for (const auto& b : weft::info::backends()) {
    fprintf(out, "%s\n    {\"name\": \"%s\", \"built\": %s, \"needs\": \"%s\", \"found\": ",
            first ? "" : ",", b.name.c_str(), b.built ? "true" : "false",
            json_escape(b.needs).c_str());
    json_findings(out, b.found);
    fprintf(out, "}");
    first = false;
  }
  fprintf(out, "\n  ],\n  \"settings\": [");
  for (int i = 0; i < int(weft::util::setting::count); ++i) {
    const auto s = weft::util::setting(i);
    const setting_row& r = weft::util::row_of(s);
    fprintf(out,
            "%s\n    {\"variable\": \"%s\", \"name\": \"%s\", \"scope\": \"%s\", \"type\": "
            "\"%s\", \"default\": \"%s\", \"range\": \"%s\", \"unit\": \"%s\", \"value\": "
            "\"%s\", \"source\": \"%s\", \"doc\": \"%s\"}",
            i ? "," : "", r.env, r.name, r.scope, type_name(r.type), json_escape(r.dflt).c_str(),
            json_escape(r.range).c_str(), r.unit, json_escape(weft::util::current_text(s)).c_str(),
            weft::util::current_source(s), json_escape(r.doc).c_str());
  }
  fprintf(out, "\n  ]\n}\n");
}

}  // namespace weft_info
