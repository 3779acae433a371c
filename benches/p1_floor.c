/* The floor of P1 (issue 47, benches/compare.sh): the bytes `loader-sim select` must read in
 * librocsparse's .hip_fatbin — the ELF section table, every bundle's header and descriptor
 * table, the zero padding between bundles, the first 64 bytes of every image (its ELF header,
 * COMPATIBILITY.md §10.1) — and nothing else: no parsing beyond the walk, no selection, no
 * output but a summary on stderr.
 *
 *   p1_floor --map FILE     the file mapped (MADV_RANDOM, as loader-sim maps it), bytes read
 *                           from the mapping: one page fault per page touched
 *   p1_floor --pread FILE   the same bytes read with pread(2) into a buffer
 *
 * The difference between the two is the cost of reading through a mapping; the --map run
 * against `loader-sim select` is what our parsing, selection and output add.
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static const unsigned char *map;
static int fd, use_map;
static unsigned char buf[1 << 16];

static void die(const char *what) {
  fprintf(stderr, "p1_floor: %s\n", what);
  exit(2);
}

/* `n` (at most sizeof buf) bytes of the file at `off`. */
static const unsigned char *at(uint64_t off, size_t n) {
  if (use_map) return map + off;
  if (n > sizeof buf) die("read too large");
  if (pread(fd, buf, n, (off_t)off) != (ssize_t)n) die("short read");
  return buf;
}

static uint64_t rd64(const unsigned char *p) {
  uint64_t v;
  memcpy(&v, p, 8);
  return v;
}

int main(int argc, char **argv) {
  if (argc != 3 || (strcmp(argv[1], "--map") && strcmp(argv[1], "--pread")))
    die("usage: p1_floor --map|--pread FILE");
  use_map = strcmp(argv[1], "--map") == 0;
  fd = open(argv[2], O_RDONLY);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0) die("cannot open FILE");
  uint64_t len = (uint64_t)st.st_size;
  if (use_map) {
    map = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
    if (map == MAP_FAILED) die("cannot map FILE");
    madvise((void *)map, len, MADV_RANDOM);
  }
  if (len < 64) die("not an ELF file");
  const unsigned char *h = at(0, 64);
  uint64_t shoff = rd64(h + 0x28);
  unsigned shnum = h[0x3C] | h[0x3D] << 8, shstrndx = h[0x3E] | h[0x3F] << 8;
  if (shoff > len || (uint64_t)shnum * 64 > len - shoff || shnum * 64u > sizeof buf / 2)
    die("bad section header table");
  static unsigned char sh[1 << 15];
  memcpy(sh, at(shoff, shnum * 64u), shnum * 64u);
  uint64_t stroff = rd64(sh + shstrndx * 64u + 0x18), strsize = rd64(sh + shstrndx * 64u + 0x20);
  if (strsize > sizeof buf || stroff > len || strsize > len - stroff) die("bad name table");
  static unsigned char names[1 << 16];
  memcpy(names, at(stroff, strsize), strsize);
  uint64_t sec_off = 0, sec_size = 0;
  for (unsigned i = 0; i < shnum; i++) {
    uint32_t name;
    memcpy(&name, sh + i * 64u, 4);
    if (name < strsize && strsize - name > 11 && memcmp(names + name, ".hip_fatbin", 12) == 0) {
      sec_off = rd64(sh + i * 64u + 0x18);
      sec_size = rd64(sh + i * 64u + 0x20);
    }
  }
  if (sec_size == 0 || sec_off > len || sec_size > len - sec_off) die("no .hip_fatbin section");

  unsigned sum = 0, bundles = 0, images = 0;
  uint64_t pos = 0;
  for (;;) {
    /* Zero padding, a page at a time. */
    for (;;) {
      uint64_t n = sec_size - pos < 4096 ? sec_size - pos : 4096;
      if (n == 0) break;
      const unsigned char *p = at(sec_off + pos, n);
      uint64_t i = 0;
      while (i < n && p[i] == 0) i++;
      pos += i;
      if (i < n) break;
    }
    if (pos >= sec_size) break;
    uint64_t room = sec_size - pos, table = room < 4096 ? room : 4096;
    const unsigned char *b = at(sec_off + pos, table);
    if (room < 32 || memcmp(b, "__CLANG_OFFLOAD_BUNDLE__", 24) != 0) die("not a bundle");
    uint64_t n = rd64(b + 24), p = 32, extent = 32;
    static uint64_t offs[64];
    if (n > 64) die("too many entries");
    for (uint64_t e = 0; e < n; e++) {
      if (p + 24 > table) die("descriptor table past 4 KiB");
      uint64_t off = rd64(b + p), size = rd64(b + p + 8), idlen = rd64(b + p + 16);
      if (idlen > table - p - 24) die("entry ID past 4 KiB");
      offs[e] = size ? off : 0;
      p += 24 + idlen;
      if (off + size > extent) extent = off + size;
    }
    if (extent > room) die("bundle runs past the section");
    for (uint64_t e = 0; e < n; e++)
      if (offs[e]) {
        sum += at(sec_off + pos + offs[e], 64)[18];
        images++;
      }
    bundles++;
    pos += extent;
  }
  fprintf(stderr, "p1_floor: %u bundles, %u image headers read (%u)\n", bundles, images, sum);
  return 0;
}
