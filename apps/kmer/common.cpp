// SPDX-License-Identifier: BSD-3-Clause
#include "common.hpp"

#include <cstdio>
#include <cstdlib>

namespace kmer {

namespace {

void usage(FILE* f, const char* prog) {
  std::fprintf(f,
               "usage: %s -k K [--exact] [--threads T] [--buffer BYTES] [--bloom-bits BITS]\n"
               "       --histo OUT FILE.fq...\n"
               "Counts the canonical k-mers of FASTQ reads over all ranks and writes their\n"
               "histogram (\"count number-of-k-mers\" lines, as jellyfish histo) to OUT.\n"
               "  -k K            k-mer length, 1..%d (21; the seed's runs use 51)\n"
               "  --exact         count every k-mer; without it a two-layer Bloom filter\n"
               "                  keeps most k-mers seen once out (bins >= 2 stay exact)\n"
               "  --threads T     threads per rank, each reading and serving (1)\n"
               "  --buffer BYTES  aggregation buffer per destination, 64..16M (8192)\n"
               "  --bloom-bits B  bits per filter layer per rank (from the input size)\n",
               prog, max_k);
}

bool number(const char* s, long long lo, long long hi, long long* out) {
  char* end = nullptr;
  const long long v = std::strtoll(s, &end, 10);
  if (!*s || *end || v < lo || v > hi) return false;
  *out = v;
  return true;
}

}  // namespace

bool parse_options(int argc, char** argv, const char* prog, options* o, int* code) {
  *code = 2;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    long long v = 0;
    auto bad = [&](const char* range) {
      std::fprintf(stderr, "%s: %s %s: %s\n", prog, a.c_str(), has_value ? argv[i + 1] : "",
                   has_value ? range : "needs a value");
      return false;
    };
    if (a == "--help" || a == "-h") {
      usage(stdout, prog);
      *code = 0;
      return false;
    } else if (a == "--exact") {
      o->exact = true;
    } else if (a == "-k") {
      if (!has_value || !number(argv[i + 1], 1, max_k, &v)) return bad("out of range 1..63");
      o->k = int(v), ++i;
    } else if (a == "--threads") {
      if (!has_value || !number(argv[i + 1], 1, 1024, &v)) return bad("out of range 1..1024");
      o->threads = int(v), ++i;
    } else if (a == "--buffer") {
      if (!has_value || !number(argv[i + 1], 64, 16 << 20, &v)) return bad("out of range 64..16M");
      o->buffer = size_t(v), ++i;
    } else if (a == "--bloom-bits") {
      if (!has_value || !number(argv[i + 1], 64, 1ll << 40, &v))
        return bad("out of range 64..2^40");
      o->bloom_bits = size_t(v), ++i;
    } else if (a == "--histo") {
      if (!has_value) return bad("");
      o->histo = argv[++i];
    } else if (!a.empty() && a[0] == '-') {
      std::fprintf(stderr, "%s: unknown option %s (see --help)\n", prog, a.c_str());
      return false;
    } else {
      o->files.push_back(a);
    }
  }
  if (o->histo.empty() || o->files.empty()) {
    std::fprintf(stderr, "%s: --histo OUT and at least one FASTQ file are needed (see --help)\n",
                 prog);
    return false;
  }
  if (o->buffer < batch_header + key_bytes(o->k)) {
    std::fprintf(stderr, "%s: --buffer %zu: too small for one k-mer\n", prog, o->buffer);
    return false;
  }
  *code = 0;
  return true;
}

std::vector<std::unique_ptr<fastq_file>> open_inputs(const options& o) {
  std::vector<std::unique_ptr<fastq_file>> files;
  for (const std::string& p : o.files) files.push_back(std::make_unique<fastq_file>(p));
  return files;
}

bool write_histogram(const std::string& path, const std::map<uint64_t, uint64_t>& h) {
  FILE* f = std::fopen(path.c_str(), "w");
  if (!f) return false;
  for (const auto& [count, n] : h)
    std::fprintf(f, "%llu %llu\n", (unsigned long long)count, (unsigned long long)n);
  return std::fclose(f) == 0;
}

}  // namespace kmer
