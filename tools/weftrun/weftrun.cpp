// SPDX-License-Identifier: BSD-3-Clause
// weftrun -n N [options] program [args]: starts N ranks of a Weft program on this host.
// See docs/launching.md. Exit status: the status of the first rank to fail (its exit code,
// or 128+signal for a rank killed by a signal; of ranks that ended together, one killed by
// a signal), 124 on --timeout, 2 on a usage error.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "weft/version.hpp"
#include "weftrun/job.hpp"

namespace {

using weftrun::options;

[[noreturn]] void usage(const char* msg) {
  if (msg) fprintf(stderr, "weftrun: %s\n", msg);
  fprintf(stderr,
          "usage: weftrun -n N [options] [--] program [args...]\n"
          "  -n, --np N          number of ranks to start (1..4096)\n"
          "  --tag-output        prefix every output line with [rank]\n"
          "  --timeout SECONDS   kill the job and fail (exit 124) after this long\n"
          "  --keep-going        when a rank dies, keep the others running\n"
          "  --bind-to core|none bind rank i to the i-th allowed core (default: core, when\n"
          "                      there are at least N cores)\n"
          "  --ranks-per-host K  pretend that each K consecutive ranks are a host of their own\n"
          "                      (WEFT_HOST_ID): shared memory within, the network across\n"
          "  -v, --verbose       say what weftrun does\n"
          "  --version           print the version and exit\n");
  exit(2);
}

options parse(int argc, char** argv) {
  options o;
  int i = 1;
  auto value = [&](const char* name) -> const char* {
    if (i + 1 >= argc) usage((std::string(name) + " needs a value").c_str());
    return argv[++i];
  };
  for (; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--") {
      ++i;
      break;
    }
    if (a.empty() || a[0] != '-') break;
    if (a == "-n" || a == "--np" || a == "-np") {
      char* end;
      const char* v = value("-n");
      long n = strtol(v, &end, 10);
      if (*end || n < 1 || n > 4096) usage((std::string("-n: '") + v + "' is not 1..4096").c_str());
      o.n = int(n);
    } else if (a == "--tag-output") {
      o.tag_output = true;
    } else if (a == "--keep-going") {
      o.keep_going = true;
    } else if (a == "--timeout") {
      char* end;
      const char* v = value("--timeout");
      o.timeout_s = strtod(v, &end);
      if (*end || o.timeout_s <= 0)
        usage((std::string("--timeout: '") + v + "' is not a positive number").c_str());
    } else if (a == "--bind-to") {
      std::string v = value("--bind-to");
      if (v == "none")
        o.bind = false;
      else if (v == "core")
        o.bind = true;
      else
        usage(("--bind-to: '" + v + "' is not core or none").c_str());
    } else if (a == "--ranks-per-host") {
      char* end;
      const char* v = value("--ranks-per-host");
      long k = strtol(v, &end, 10);
      if (*end || k < 1 || k > 4096)
        usage((std::string("--ranks-per-host: '") + v + "' is not 1..4096").c_str());
      o.ranks_per_host = int(k);
    } else if (a == "-v" || a == "--verbose") {
      o.verbose = true;
    } else if (a == "-h" || a == "--help") {
      usage(nullptr);
    } else if (a == "--version") {
      printf("weftrun (Weft) %s\n", WEFT_VERSION_STRING);
      exit(0);
    } else {
      usage(("unknown option " + a).c_str());
    }
  }
  if (i >= argc) usage("no program given");
  for (; i < argc; ++i) o.argv.push_back(argv[i]);
  o.argv.push_back(nullptr);
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  const options o = parse(argc, argv);
  return weftrun::job(o).run();
}
