// kpack_probe: asks rocm-kpack's C loader (librocm_kpack) for the code object of one HIP
// wrapper of a split host library, the way the HIP runtime (CLR, DigestFatBinary) does, and
// prints the result. Built by scripts/build-kpack-loader.sh; run by oracle/run.sh.
//
//   kpack_probe LIB WRAPPER_INDEX ARCH [ARCH...]
//
// LIB is an x86-64 ELF shared library that rocm-kpack's splitter rewrote. The probe reads the
// WRAPPER_INDEX-th 24-byte wrapper of .hipFatBinSegment (magic HIPK), takes the address of the
// ref record from the R_X86_64_RELATIVE relocation of its pointer field (the file bytes are
// zero), reads up to 64 KiB of the file from there (zero-padded, as the loader parses at most
// 64 KiB), and calls kpack_load_code_object with the real path of LIB, co_index = the
// wrapper's reserved1 field and the ARCH list, under the environment it was started with
// (ROCM_KPACK_PATH, ROCM_KPACK_PATH_PREFIX, ROCM_KPACK_DISABLE, ROCM_KPACK_DEBUG).
// Output: `error N` (the kpack_error_t) or `ok SIZE SHA256`.
#include <elf.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <string>
#include <vector>

#include "rocm_kpack/kpack.h"

namespace {

// SHA-256 (FIPS 180-4), enough for printing a digest.
struct Sha256 {
  uint32_t h[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  static uint32_t rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }
  void block(const uint8_t* p) {
    static const uint32_t k[64] = {
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
        0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
        0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
        0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
        0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
        0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
        0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
        0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
        0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
        0xc67178f2};
    uint32_t w[64];
    for (int i = 0; i < 16; ++i)
      w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
             (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
    for (int i = 16; i < 64; ++i) {
      uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
      uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
      w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], hh = h[7];
    for (int i = 0; i < 64; ++i) {
      uint32_t t1 = hh + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + k[i] + w[i];
      uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
      hh = g; g = f; f = e; e = d + t1; d = c; c = b; b = a; a = t1 + t2;
    }
    h[0] += a; h[1] += b; h[2] += c; h[3] += d; h[4] += e; h[5] += f; h[6] += g; h[7] += hh;
  }
  std::string digest(const uint8_t* data, size_t n) {
    size_t i = 0;
    for (; i + 64 <= n; i += 64) block(data + i);
    uint8_t tail[128] = {0};
    size_t rest = n - i;
    memcpy(tail, data + i, rest);
    tail[rest] = 0x80;
    size_t len = rest + 9 <= 64 ? 64 : 128;
    uint64_t bits = (uint64_t)n * 8;
    for (int j = 0; j < 8; ++j) tail[len - 1 - j] = (uint8_t)(bits >> (8 * j));
    block(tail);
    if (len == 128) block(tail + 64);
    std::string out;
    char hex[9];
    for (uint32_t v : h) { snprintf(hex, sizeof hex, "%08x", v); out += hex; }
    return out;
  }
};

[[noreturn]] void die(const char* what) {
  fprintf(stderr, "kpack_probe: %s\n", what);
  exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) die("usage: kpack_probe LIB WRAPPER_INDEX ARCH [ARCH...]");
  char real[PATH_MAX];
  if (!realpath(argv[1], real)) die("cannot resolve LIB");
  FILE* f = fopen(real, "rb");
  if (!f) die("cannot open LIB");
  std::vector<uint8_t> file;
  uint8_t chunk[1 << 16];
  size_t got;
  while ((got = fread(chunk, 1, sizeof chunk, f)) > 0) file.insert(file.end(), chunk, chunk + got);
  fclose(f);
  if (file.size() < sizeof(Elf64_Ehdr)) die("not an ELF file");
  Elf64_Ehdr eh;
  memcpy(&eh, file.data(), sizeof eh);
  if (memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64)
    die("not a 64-bit ELF file");
  auto shdr = [&](size_t i) {
    Elf64_Shdr s;
    size_t at = eh.e_shoff + i * sizeof(Elf64_Shdr);
    if (at + sizeof s > file.size()) die("section header out of the file");
    memcpy(&s, file.data() + at, sizeof s);
    return s;
  };
  Elf64_Shdr strtab = shdr(eh.e_shstrndx);
  Elf64_Shdr seg{};
  bool have_seg = false;
  std::vector<Elf64_Shdr> relas;
  for (size_t i = 0; i < eh.e_shnum; ++i) {
    Elf64_Shdr s = shdr(i);
    const char* name = (const char*)file.data() + strtab.sh_offset + s.sh_name;
    if (strcmp(name, ".hipFatBinSegment") == 0) { seg = s; have_seg = true; }
    if (s.sh_type == SHT_RELA) relas.push_back(s);
  }
  if (!have_seg) die("no .hipFatBinSegment");
  size_t index = strtoul(argv[2], nullptr, 10);
  if ((index + 1) * 24 > seg.sh_size) die("no such wrapper");
  const uint8_t* w = file.data() + seg.sh_offset + index * 24;
  uint32_t magic, version;
  uint64_t ptr, reserved1;
  memcpy(&magic, w, 4);
  memcpy(&version, w + 4, 4);
  memcpy(&ptr, w + 8, 8);
  memcpy(&reserved1, w + 16, 8);
  if (magic != 0x4B504948) die("wrapper magic is not HIPK");
  uint64_t field = seg.sh_addr + index * 24 + 8;
  for (const Elf64_Shdr& r : relas) {
    for (uint64_t at = r.sh_offset; at + sizeof(Elf64_Rela) <= r.sh_offset + r.sh_size;
         at += sizeof(Elf64_Rela)) {
      Elf64_Rela rel;
      memcpy(&rel, file.data() + at, sizeof rel);
      if (rel.r_offset == field && ELF64_R_TYPE(rel.r_info) == R_X86_64_RELATIVE)
        ptr = rel.r_addend;
    }
  }
  uint64_t off = UINT64_MAX;
  for (size_t i = 0; i < eh.e_phnum; ++i) {
    Elf64_Phdr ph;
    memcpy(&ph, file.data() + eh.e_phoff + i * sizeof ph, sizeof ph);
    if (ph.p_type == PT_LOAD && ptr >= ph.p_vaddr && ptr < ph.p_vaddr + ph.p_filesz)
      off = ph.p_offset + (ptr - ph.p_vaddr);
  }
  if (off == UINT64_MAX) die("the ref record is not in the file");
  std::vector<uint8_t> ref(64 * 1024, 0);
  memcpy(ref.data(), file.data() + off, std::min<size_t>(ref.size(), file.size() - off));

  kpack_cache_t cache = nullptr;
  kpack_error_t err = kpack_cache_create(&cache);
  if (err != KPACK_SUCCESS) { printf("error %d\n", (int)err); return 0; }
  std::vector<const char*> arches(argv + 3, argv + argc);
  void* co = nullptr;
  size_t size = 0;
  err = kpack_load_code_object(cache, ref.data(), real, (uint32_t)reserved1, arches.data(),
                               arches.size(), &co, &size);
  if (err != KPACK_SUCCESS) {
    printf("error %d\n", (int)err);
  } else {
    Sha256 sha;
    printf("ok %zu %s\n", size, sha.digest((const uint8_t*)co, size).c_str());
    kpack_free_code_object(co);
  }
  kpack_cache_destroy(cache);
  (void)version;
  return 0;
}
