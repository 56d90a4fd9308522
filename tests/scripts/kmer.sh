#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# weft-kmer against jellyfish on Debian's bowtie2-examples reads (lambda phage): with
# --exact the histogram equals `jellyfish count -C` + `jellyfish histo` exactly, for k = 21
# and 51 on 1-3 ranks and 1-2 threads; with the Bloom filter every bin from 2 up is equal and
# the count-1 bin is at most jellyfish's. Then --help and bad input.
set -u
weftrun=$1 src=$3 build=$4
. "$(dirname "$0")/common.sh"
kmer=$build/apps/kmer/weft-kmer
reads=/usr/share/doc/bowtie2/examples/reads
command -v jellyfish >/dev/null || fail "jellyfish not installed (Debian package jellyfish)"
[ -e "$reads/reads_1.fq.gz" ] || fail "no $reads/reads_1.fq.gz (Debian package bowtie2-examples)"
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
out=$work/out
zcat "$reads/reads_1.fq.gz" >"$work/r1.fq" && zcat "$reads/reads_2.fq.gz" >"$work/r2.fq" || fail "zcat"

run_kmer() {  # ranks, then weft-kmer's arguments: the job's status and every rank's line
  local n=$1 r; shift
  timeout 120 "$weftrun" -n "$n" "$kmer" "$@" >"$out" 2>&1 || { cat "$out"; fail "weft-kmer -n $n $*: exit status $?"; }
  for r in $(seq 0 $((n - 1))); do
    grep -Eq "^rank $r: weft-kmer: [0-9]+ reads, [0-9]+ k-mers" "$out" || { cat "$out"; fail "rank $r printed no line: $*"; }
  done
}

for k in 21 51; do
  jellyfish count -C -m $k -s 4M -t 2 -o "$work/j.jf" "$work/r1.fq" "$work/r2.fq" || fail "jellyfish count"
  jellyfish histo -h 100000000 "$work/j.jf" >"$work/j$k.histo" || fail "jellyfish histo"
  [ -s "$work/j$k.histo" ] || fail "jellyfish wrote no histogram"
  for conf in "1 1" "2 2" "3 1"; do
    set -- $conf
    run_kmer "$1" -k $k --exact --threads "$2" --buffer 1024 --histo "$work/w.histo" "$work/r1.fq" "$work/r2.fq"
    cmp -s "$work/w.histo" "$work/j$k.histo" || { diff "$work/w.histo" "$work/j$k.histo" | head; fail "k=$k ranks=$1 threads=$2 --exact: histogram differs from jellyfish's"; }
    run_kmer "$1" -k $k --threads "$2" --histo "$work/b.histo" "$work/r1.fq" "$work/r2.fq"
    cmp -s <(tail -n +2 "$work/b.histo") <(tail -n +2 "$work/j$k.histo") || fail "k=$k ranks=$1 threads=$2 Bloom: bins >= 2 differ"
    read -r c1 b1 <"$work/b.histo"; read -r cj bj <"$work/j$k.histo"
    [ "$c1" = 1 ] && [ "$cj" = 1 ] && [ "$b1" -le "$bj" ] || fail "k=$k Bloom: count-1 bin $b1 above jellyfish's $bj"
  done
  # Buffers of 64 KiB: above the largest packet, so every batch goes by rendezvous.
  run_kmer 2 -k $k --exact --threads 2 --buffer 65536 --histo "$work/w.histo" "$work/r1.fq" "$work/r2.fq"
  cmp -s "$work/w.histo" "$work/j$k.histo" || fail "k=$k --buffer 65536: histogram differs from jellyfish's"
  pass "k=$k: exact histograms equal jellyfish's on 1, 2 and 3 ranks and with 64 KiB buffers; with the Bloom filter bins >= 2 equal, bin 1 $b1 <= $bj"
  # The MPI baseline, each flavour and thread level, with a buffer above MPI's eager size too.
  for flavour in mpich openmpi; do
    exe=$build/apps/kmer/mpi-kmer-$flavour
    [ -x "$exe" ] || continue
    if [ $flavour = mpich ]; then launch="mpiexec.mpich -bind-to none"; else
      launch="mpirun.openmpi --allow-run-as-root --oversubscribe --bind-to none"; fi
    for mode in multiple funneled; do
      for buf in 1024 65536; do
        timeout 120 $launch -n 2 "$exe" --mpi $mode -k $k --exact --threads 2 --buffer $buf \
          --histo "$work/m.histo" "$work/r1.fq" "$work/r2.fq" >"$out" 2>&1 || { cat "$out"; fail "mpi-kmer-$flavour --mpi $mode: exit status"; }
        [ "$(grep -Ec "^rank [01]: mpi-kmer: [0-9]+ reads" "$out")" -eq 2 ] || { cat "$out"; fail "mpi-kmer-$flavour: a rank printed no line"; }
        cmp -s "$work/m.histo" "$work/j$k.histo" || fail "mpi-kmer-$flavour --mpi $mode --buffer $buf k=$k: histogram differs from jellyfish's"
      done
    done
    pass "k=$k: mpi-kmer-$flavour (MPI_THREAD_MULTIPLE and FUNNELED, 1 and 64 KiB buffers) equals jellyfish"
  done
done

"$kmer" --help >"$out" 2>&1 || fail "--help: exit status $?"
grep -q "usage: weft-kmer -k K" "$out" || fail "--help printed no usage"
expect_error "cannot open" "$weftrun" -n 1 "$kmer" -k 21 --histo "$work/x" "$work/missing.fq"
expect_error "out of range 1..63" "$weftrun" -n 1 "$kmer" -k 70 --histo "$work/x" "$work/r1.fq"
head -c 1000 "$work/r1.fq" >"$work/cut.fq"
expect_error "truncated or not FASTQ" "$weftrun" -n 2 "$kmer" -k 21 --histo "$work/x" "$work/cut.fq"
printf 'not fastq\n' >"$work/bad.fq"
expect_error "not FASTQ" "$weftrun" -n 1 "$kmer" -k 21 --histo "$work/x" "$work/bad.fq"
pass "--help, and clear errors for a missing file, k out of range, a truncated record, a non-FASTQ file"
