// SPDX-License-Identifier: BSD-3-Clause
#include "options.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace soak {
namespace {

const char* usage =
    "usage: weftrun -n N weft-soak --seconds S [--threads T] [--resources dedicated|shared]\n"
    "         [--kill | --stop [SECONDS]] [--inject drop|dup|corrupt] [--max-size BYTES]\n"
    "         [--window W] [--seed X] [--drain S] [--report-every S]\n"
    "A random mix of send/recv, active messages and put/get (with and without notification)\n"
    "between every pair of ranks, every payload checked at its receiver; ends with\n"
    "  soak: operations X verified Y lost L duplicated D corrupted C\n"
    "and a non-zero exit status when L, D or C is not zero or an operation failed.\n"
    "--kill: a random rank other than 0 kills itself (SIGKILL) at a random moment;\n"
    "--stop: it stops itself (SIGSTOP) that long (default 35 s: past the default\n"
    "WEFT_PEER_TIMEOUT; give more when it is raised), then\n"
    "resumes; run under weftrun --keep-going. --inject: rank 0 drops, duplicates or\n"
    "corrupts one message, which the checks must catch.\n";

[[noreturn]] void bad(const char* arg, const char* value, const char* why) {
  fprintf(stderr, "weft-soak: %s = %s: %s\n%s", arg, value ? value : "(missing)", why, usage);
  exit(2);
}

double number(const char* arg, const char* v, double lo, double hi) {
  if (!v) bad(arg, v, "needs a value");
  char* end = nullptr;
  const double x = strtod(v, &end);
  if (end == v || *end || !(x >= lo && x <= hi)) {
    char range[96];
    snprintf(range, sizeof range, "must be a number in [%g, %g]", lo, hi);
    bad(arg, v, range);
  }
  return x;
}

}  // namespace

const char* name(inject i) {
  switch (i) {
    case inject::drop: return "drop";
    case inject::dup: return "dup";
    case inject::corrupt: return "corrupt";
    default: return "none";
  }
}

options parse(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
    auto is = [&](const char* s) { return strcmp(a, s) == 0; };
    if (is("--seconds")) {
      o.seconds = number(a, v, 0.1, 1e6), ++i;
    } else if (is("--threads")) {
      o.threads = int(number(a, v, 1, 32)), ++i;
    } else if (is("--resources")) {
      if (!v || (strcmp(v, "dedicated") && strcmp(v, "shared")))
        bad(a, v, "must be dedicated or shared");
      o.shared = strcmp(v, "shared") == 0, ++i;
    } else if (is("--kill")) {
      o.victim = fault::kill;
    } else if (is("--stop")) {
      o.victim = fault::stop;
      if (v && v[0] != '-') o.stop_for = number(a, v, 0.1, 3600), ++i;
    } else if (is("--inject")) {
      if (!v) bad(a, v, "needs drop, dup or corrupt");
      if (!strcmp(v, "drop"))
        o.bug = inject::drop;
      else if (!strcmp(v, "dup"))
        o.bug = inject::dup;
      else if (!strcmp(v, "corrupt"))
        o.bug = inject::corrupt;
      else
        bad(a, v, "must be drop, dup or corrupt");
      ++i;
    } else if (is("--max-size")) {
      o.max_size = size_t(number(a, v, 64, double(size_t(1) << 30))), ++i;
    } else if (is("--window")) {
      o.window = int(number(a, v, 1, 1024)), ++i;
    } else if (is("--seed")) {
      o.seed = uint64_t(number(a, v, 1, 1e18)), ++i;
    } else if (is("--drain")) {
      o.drain = number(a, v, 1, 3600), ++i;
    } else if (is("--report-every")) {
      o.report_every = number(a, v, 0, 1e6), ++i;
    } else if (is("--help") || is("-h")) {
      fputs(usage, stdout);
      exit(0);
    } else {
      bad("argument", a, "unknown");
    }
  }
  return o;
}

}  // namespace soak
