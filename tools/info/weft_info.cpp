// SPDX-License-Identifier: BSD-3-Clause
// weft-info: the counterpart of ucx_info and fi_info. Prints the version and build
// options, the backends built in (and what the others need), what each finds on this
// machine, and every setting with its default, its value now and where that came from.
#include <cstdio>
#include <cstring>

#include "format.hpp"
#include "util/settings.hpp"
#include "weft/version.hpp"

namespace {
void usage(FILE* out) {
  fprintf(out,
          "usage: weft-info [--json | --markdown | --version | --help]\n"
          "  (none)      build, backends and what they find here, every setting\n"
          "  --json      the same as one JSON object, for scripts\n"
          "  --markdown  the settings tables of docs/configuration.md\n"
          "  --version   the version\n");
}
}  // namespace

int main(int argc, char** argv) {
  if (argc > 2) {
    usage(stderr);
    return 2;
  }
  const char* a = argc == 2 ? argv[1] : "";
  weft::util::warn_unknown_settings();  // a misspelt WEFT_* variable, named on stderr
  if (!*a) {
    printf("Weft %s\n\n", WEFT_VERSION_STRING);
    weft_info::print_text(stdout);
  } else if (!strcmp(a, "--json")) {
    weft_info::print_json(stdout);
  } else if (!strcmp(a, "--markdown")) {
    weft_info::print_settings_markdown(stdout);
  } else if (!strcmp(a, "--version")) {
    printf("weft-info (Weft) %s\n", WEFT_VERSION_STRING);
  } else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
    usage(stdout);
  } else {
    fprintf(stderr, "weft-info: unknown option '%s'\n", a);
    usage(stderr);
    return 2;
  }
  return 0;
}
