/* The peer of `loader-sim select` in benches/compare.sh (issue 8, P1): AMD comgr's
 * amd_comgr_lookup_code_object on every bundle of a host library's .hip_fatbin, the way
 * the HIP runtime (ROCm CLR, hipamd/src/hip_fatbin.cpp PopulateCodeObjectMap) calls it:
 *
 *   - the library is memory-mapped, as the dynamic loader maps it (CLR receives pointers
 *     into the mapped .hip_fatbin from __hipRegisterFatBinary);
 *   - per bundle, a FATBIN data object is created and given 4096 bytes from the start of
 *     the bundle ("There is no way to find size of offload bundle, so we pass 4096 here");
 *   - one amd_comgr_lookup_code_object call per bundle with the query list of one device.
 *
 *   comgr_select [--clr-queries] [--read] FILE ISA
 *
 * ISA is a full comgr ISA name (amdgcn-amd-amdhsa--gfx90a:sramecc+:xnack-). With
 * --clr-queries the query list is what CLR builds for one device: the two SPIR-V names,
 * the device's ISA and its generic name if the caller adds it as further ISA arguments.
 * --read reads the whole file into memory first instead of mapping it (for comparison).
 *
 * The harness finds the bundles itself, exactly as offload-image's walk does: from the
 * start of the section, skip zero bytes, read a bundle header, continue after the end of
 * its last payload. Output: one line per bundle, "FILE_OFFSET_OF_IMAGE SIZE" of the first
 * query's answer (offset absolute in FILE, "- 0" when no image matched), then a summary
 * on stderr.
 */
#include <amd_comgr.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static uint64_t rd64(const unsigned char *p) {
  uint64_t v;
  memcpy(&v, p, 8);
  return v;
}
static uint32_t rd32(const unsigned char *p) {
  uint32_t v;
  memcpy(&v, p, 4);
  return v;
}
static uint16_t rd16(const unsigned char *p) {
  uint16_t v;
  memcpy(&v, p, 2);
  return v;
}

static void die(const char *what) {
  fprintf(stderr, "comgr_select: %s\n", what);
  exit(2);
}

int main(int argc, char **argv) {
  int clr = 0, whole = 0;
  while (argc > 1 && argv[1][0] == '-' && argv[1][1] == '-') {
    if (strcmp(argv[1], "--clr-queries") == 0)
      clr = 1;
    else if (strcmp(argv[1], "--read") == 0)
      whole = 1;
    else
      die("unknown option");
    argv++;
    argc--;
  }
  if (argc < 3) die("usage: comgr_select [--clr-queries] [--read] FILE ISA [ISA...]");
  int fd = open(argv[1], O_RDONLY);
  if (fd < 0) die("cannot open FILE");
  struct stat st;
  if (fstat(fd, &st) != 0) die("cannot stat FILE");
  size_t len = (size_t)st.st_size;
  const unsigned char *file;
  if (whole) {
    unsigned char *buf = malloc(len);
    if (!buf) die("out of memory");
    for (size_t got = 0; got < len;) {
      ssize_t n = read(fd, buf + got, len - got);
      if (n <= 0) die("cannot read FILE");
      got += (size_t)n;
    }
    file = buf;
  } else {
    file = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
    if (file == MAP_FAILED) die("cannot map FILE");
  }

  /* The query list. */
  const char *spirv[2] = {"spirv64-amd-amdhsa--amdgcnspirv",
                          "spirv64-amd-amdhsa-unknown-amdgcnspirv"};
  int nisa = argc - 2, nq = nisa + (clr ? 2 : 0);
  amd_comgr_code_object_info_t *q = calloc((size_t)nq, sizeof *q);
  const char **names = calloc((size_t)nq, sizeof *names);
  if (!q || !names) die("out of memory");
  int k = 0;
  for (int i = 0; i < nisa; i++) names[k++] = argv[2 + i];
  if (clr) {
    names[k++] = spirv[0];
    names[k++] = spirv[1];
  }

  /* ELF64 little-endian section headers: find .hip_fatbin. */
  if (len < 64 || memcmp(file, "\177ELF", 4) != 0 || file[4] != 2 || file[5] != 1)
    die("not a 64-bit little-endian ELF file");
  uint64_t shoff = rd64(file + 0x28);
  uint16_t shentsize = rd16(file + 0x3A), shnum = rd16(file + 0x3C), shstrndx = rd16(file + 0x3E);
  if (shentsize != 64 || shoff > len || (uint64_t)shnum * 64 > len - shoff || shstrndx >= shnum)
    die("bad section header table");
  const unsigned char *strtab_sh = file + shoff + (uint64_t)shstrndx * 64;
  uint64_t stroff = rd64(strtab_sh + 0x18), strsize = rd64(strtab_sh + 0x20);
  if (stroff > len || strsize > len - stroff) die("bad section name table");
  uint64_t sec_off = 0, sec_size = 0;
  for (unsigned i = 0; i < shnum; i++) {
    const unsigned char *sh = file + shoff + (uint64_t)i * 64;
    uint32_t name = rd32(sh);
    if (name < strsize && strsize - name > 11 &&
        memcmp(file + stroff + name, ".hip_fatbin", 12) == 0) {
      sec_off = rd64(sh + 0x18);
      sec_size = rd64(sh + 0x20);
    }
  }
  if (sec_size == 0 || sec_off > len || sec_size > len - sec_off) die("no .hip_fatbin section");

  int bundles = 0, matched = 0;
  uint64_t pos = 0;
  for (;;) {
    while (pos < sec_size && file[sec_off + pos] == 0) pos++;
    if (pos >= sec_size) break;
    const unsigned char *b = file + sec_off + pos;
    uint64_t room = sec_size - pos;
    if (room < 32 || memcmp(b, "__CLANG_OFFLOAD_BUNDLE__", 24) != 0)
      die("unexpected bytes between bundles");
    /* The bundle's extent, from its descriptor table (not comgr's business; HIP gets one
     * pointer per bundle from __hipRegisterFatBinary). */
    uint64_t n = rd64(b + 24), at = 32, extent = 32;
    for (uint64_t e = 0; e < n; e++) {
      if (room < 24 || at > room - 24) die("truncated descriptor table");
      uint64_t off = rd64(b + at), size = rd64(b + at + 8), idlen = rd64(b + at + 16);
      if (idlen > room - at - 24) die("truncated entry ID");
      at += 24 + idlen;
      if (off + size > extent) extent = off + size;
    }
    if (extent > room) die("bundle runs past the section");

    amd_comgr_data_t data;
    size_t give = room < 4096 ? (size_t)room : 4096;
    if (amd_comgr_create_data(AMD_COMGR_DATA_KIND_FATBIN, &data) != AMD_COMGR_STATUS_SUCCESS ||
        amd_comgr_set_data(data, give, (const char *)b) != AMD_COMGR_STATUS_SUCCESS)
      die("comgr data");
    for (int j = 0; j < nq; j++) {
      q[j].isa = names[j];
      q[j].offset = 0;
      q[j].size = 0;
    }
    if (amd_comgr_lookup_code_object(data, q, (size_t)nq) != AMD_COMGR_STATUS_SUCCESS)
      die("amd_comgr_lookup_code_object failed");
    amd_comgr_release_data(data);
    if (q[0].size != 0) {
      matched++;
      printf("%llu %llu\n", (unsigned long long)(sec_off + pos + q[0].offset),
             (unsigned long long)q[0].size);
    } else {
      printf("- 0\n");
    }
    bundles++;
    pos += extent > 1 ? extent : 1;
  }
  fprintf(stderr, "comgr_select: %d bundles, %d with an image for %s\n", bundles, matched,
          names[0]);
  return 0;
}
