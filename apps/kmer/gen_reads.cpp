// SPDX-License-Identifier: BSD-3-Clause
// kmer-gen-reads: reproducible FASTQ reads for the k-mer counter's measurements. A genome
// (a FASTA reference's sequences joined, or --genome N random bases) is sampled at uniform
// random positions on either strand; each read is --length bases long, each base is
// substituted by another with probability --error (its quality character then '#', else
// 'I'), and made 'N' with probability --n-rate. Everything comes from one splitmix64 stream
// seeded by --seed: the same arguments give the same file, byte for byte.
//   kmer-gen-reads (--reference REF.fa | --genome N) --bytes B [--length 150] [--error 0.01]
//                  [--n-rate 0.0005] [--seed 1] > reads.fq
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

uint64_t state;
uint64_t next() {  // splitmix64
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
double uniform() {
  return double(next() >> 11) * (1.0 / 9007199254740992.0);
}

bool read_fasta(const char* path, std::string* genome) {
  FILE* f = std::fopen(path, "r");
  if (!f) return false;
  char line[65536];
  while (std::fgets(line, sizeof(line), f)) {
    if (line[0] == '>') continue;
    for (char* c = line; *c; ++c)
      if (std::strchr("ACGTacgt", *c)) genome->push_back(char(*c & ~0x20));
  }
  std::fclose(f);
  return true;
}

int usage() {
  std::fprintf(stderr,
               "usage: kmer-gen-reads (--reference REF.fa | --genome N) --bytes B [--length L]\n"
               "       [--error E] [--n-rate R] [--seed S] > reads.fq\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  const char* ref = nullptr;
  double genome_len = 0, bytes = 0, error = 0.01, nrate = 0.0005;
  int length = 150;
  uint64_t seed = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    const char* v = argv[i + 1];
    if (a == "--reference")
      ref = v;
    else if (a == "--genome")
      genome_len = std::atof(v);
    else if (a == "--bytes")
      bytes = std::atof(v);
    else if (a == "--length")
      length = std::atoi(v);
    else if (a == "--error")
      error = std::atof(v);
    else if (a == "--n-rate")
      nrate = std::atof(v);
    else if (a == "--seed")
      seed = std::strtoull(v, nullptr, 10);
    else
      return usage();
  }
  if (argc % 2 == 0 || (!ref && genome_len < 1) || bytes < 1 || length < 1 || length > 100000 ||
      error < 0 || error > 1 || nrate < 0 || nrate > 1)
    return usage();
  state = seed;
  std::string genome;
  if (ref) {
    if (!read_fasta(ref, &genome)) {
      std::fprintf(stderr, "kmer-gen-reads: %s: cannot read\n", ref);
      return 2;
    }
  } else {
    genome.resize(size_t(genome_len));
    for (char& c : genome) c = "ACGT"[next() & 3];
  }
  if (genome.size() < size_t(length)) {
    std::fprintf(stderr, "kmer-gen-reads: the genome (%zu bases) is shorter than a read\n",
                 genome.size());
    return 2;
  }
  std::string seq(size_t(length), 'A'), qual(size_t(length), 'I');
  double written = 0;
  for (uint64_t r = 0; written < bytes; ++r) {
    const size_t at = size_t(next() % (genome.size() - size_t(length) + 1));
    const bool reverse = next() & 1;
    for (int i = 0; i < length; ++i) {
      char b = reverse ? "TGCA"[std::strchr("ACGT", genome[at + size_t(length - 1 - i)]) - "ACGT"]
                       : genome[at + size_t(i)];
      qual[size_t(i)] = 'I';
      if (uniform() < error) {
        b = "ACGT"[(std::strchr("ACGT", b) - "ACGT" + 1 + int(next() % 3)) % 4];
        qual[size_t(i)] = '#';
      }
      if (uniform() < nrate) b = 'N', qual[size_t(i)] = '#';
      seq[size_t(i)] = b;
    }
    written +=
        std::printf("@read%llu\n%s\n+\n%s\n", (unsigned long long)r, seq.c_str(), qual.c_str());
  }
  return 0;
}
