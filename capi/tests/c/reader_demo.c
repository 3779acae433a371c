/* The handle API from C (cc -std=c11 -Wall -Wextra -Werror -pedantic).
 *
 *   reader_demo FILE OUTDIR TARGET...
 *
 * Reads FILE into memory, opens a reader over it, selects for all TARGETs in one call,
 * fetches the chosen images, then lists every image. Prints tab-separated lines that
 * tests/suite/c_api.rs compares with loader-sim and the corpus manifest:
 *   unit    <u> <index in container> <compression> <location>
 *   stats   <phase> <decode passes> <decoded bytes> <held bytes>
 *   select  <u> <target> <name|-> <offset|-> <size|-> <image|->
 *   image   <i> <u> <index> <name> <offset|-> <size> <offload kind> <triple> <target> <kind>
 * and writes the chosen images to OUTDIR/sel-<u>-<t>.bin and every image to
 * OUTDIR/img-<i>.bin. Checks by itself that image bytes are handed out in place for
 * images stored uncompressed and that repeated calls return the same pointer.
 * Exit status: 0, 1 if some unit has no image for some target, 2 on errors, 3 when a
 * check fails. */
#include "offload_image.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(const char *what, const oi_error *err) {
  fprintf(stderr, "%s: %s (%s at byte %llu)\n", what, err->message.data,
          oi_status_name(err->code), (unsigned long long)err->offset);
  return 2;
}

static int check(int ok, const char *what) {
  if (!ok) fprintf(stderr, "check failed: %s\n", what);
  return ok;
}

static unsigned char *read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *buf = malloc(n > 0 ? (size_t)n : 1);
  if (buf && n > 0 && fread(buf, 1, (size_t)n, f) != (size_t)n) {
    free(buf);
    buf = NULL;
  }
  fclose(f);
  *len = n > 0 ? (size_t)n : 0;
  return buf;
}

static int write_file(const char *dir, const char *name, const uint8_t *data, size_t len) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "wb");
  if (!f) return 0;
  size_t w = len ? fwrite(data, 1, len, f) : 0;
  fclose(f);
  return w == len;
}

static void stats(const oi_reader *r, const char *phase) {
  oi_reader_stats s;
  oi_reader_get_stats(r, &s);
  printf("stats\t%s\t%llu\t%llu\t%llu\n", phase, (unsigned long long)s.decode_passes,
         (unsigned long long)s.decoded_bytes, (unsigned long long)s.held_bytes);
}

/* The bytes of image i, checked against its description. */
static int image_bytes(const oi_reader *r, const unsigned char *buf, size_t i,
                       const oi_image_info *info, const uint8_t **data, size_t *len) {
  oi_error err;
  if (oi_reader_image_data(r, i, data, len, &err) != OI_OK) return fail("image_data", &err);
  const uint8_t *again = NULL;
  size_t again_len = 0;
  if (oi_reader_image_data(r, i, &again, &again_len, &err) != OI_OK)
    return fail("image_data", &err);
  if (!check(again == *data && again_len == *len, "the same bytes twice")) return 3;
  if (!check(*len == info->size, "size")) return 3;
  if (info->offset != OI_NO_OFFSET && !check(*data == buf + info->offset, "in place")) return 3;
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: %s FILE OUTDIR TARGET...\n", argv[0]);
    return 2;
  }
  size_t len = 0;
  unsigned char *buf = read_file(argv[1], &len);
  if (!buf) return 2;
  const char *dir = argv[2];
  const char *const *targets = (const char *const *)&argv[3];
  size_t n = (size_t)argc - 3;

  oi_error err;
  oi_read_options ro;
  memset(&ro, 0, sizeof ro); /* defaults: limits, hash verified */
  oi_reader *r = oi_reader_open(buf, len, &ro, &err);
  if (!r) return fail("open", &err);
  stats(r, "open");

  size_t units = oi_reader_unit_count(r);
  for (size_t u = 0; u < units; u++) {
    oi_unit_info ui;
    if (oi_reader_unit(r, u, &ui, &err) != OI_OK) return fail("unit", &err);
    if (!check(strlen(ui.location.data) == ui.location.len, "location length")) return 3;
    printf("unit\t%zu\t%llu\t%u\t%s\n", u, (unsigned long long)ui.index_in_container,
           ui.compression, ui.location.data);
  }

  oi_selection *sel = calloc(units * n + 1, sizeof *sel);
  /* Too small an array is refused before anything is done. */
  if (units > 0 &&
      !check(oi_reader_select(r, targets, n, NULL, sel, units * n - 1, &err) ==
                 OI_ERR_BUFFER_TOO_SMALL,
             "too small results array refused"))
    return 3;
  int32_t rc = oi_reader_select(r, targets, n, NULL, sel, units * n, &err);
  if (rc != OI_OK && rc != OI_NO_MATCH) return fail("select", &err);
  stats(r, "select");

  for (size_t u = 0; u < units; u++) {
    for (size_t t = 0; t < n; t++) {
      const oi_selection *s = &sel[u * n + t];
      if (!s->found) {
        if (!check(s->image == OI_NO_IMAGE, "no image")) return 3;
        printf("select\t%zu\t%s\t-\t-\t-\t-\n", u, targets[t]);
        continue;
      }
      oi_image_info info;
      if (oi_reader_image(r, s->image, &info, &err) != OI_OK) return fail("image", &err);
      if (!check(info.unit == u, "chosen image is in its unit")) return 3;
      const uint8_t *data = NULL;
      size_t size = 0;
      int bad = image_bytes(r, buf, s->image, &info, &data, &size);
      if (bad) return bad;
      char name[64];
      snprintf(name, sizeof name, "sel-%zu-%zu.bin", u, t);
      if (!write_file(dir, name, data, size)) return 2;
      char offset[32] = "-";
      if (info.offset != OI_NO_OFFSET)
        snprintf(offset, sizeof offset, "%llu", (unsigned long long)info.offset);
      printf("select\t%zu\t%s\t%s\t%s\t%llu\t%zu\n", u, targets[t], info.name.data, offset,
             (unsigned long long)info.size, s->image);
    }
  }
  stats(r, "data");

  size_t count = 0;
  if (oi_reader_image_count(r, &count, &err) != OI_OK) return fail("image_count", &err);
  for (size_t i = 0; i < count; i++) {
    oi_image_info info;
    if (oi_reader_image(r, i, &info, &err) != OI_OK) return fail("image", &err);
    if (!check(strlen(info.name.data) == info.name.len, "name length")) return 3;
    const uint8_t *data = NULL;
    size_t size = 0;
    int bad = image_bytes(r, buf, i, &info, &data, &size);
    if (bad) return bad;
    char name[64];
    snprintf(name, sizeof name, "img-%zu.bin", i);
    if (!write_file(dir, name, data, size)) return 2;
    char offset[32] = "-";
    if (info.offset != OI_NO_OFFSET)
      snprintf(offset, sizeof offset, "%llu", (unsigned long long)info.offset);
    printf("image\t%zu\t%zu\t%zu\t%s\t%s\t%llu\t%s\t%s\t%s\t%u\n", i, info.unit, info.index,
           info.name.data, offset, (unsigned long long)info.size, info.offload_kind.data,
           info.triple.data, info.target.data, info.image_kind);
  }
  /* Out of range is an error, not a crash. */
  oi_image_info none;
  if (!check(oi_reader_image(r, count, &none, &err) == OI_ERR_INVALID_ARGUMENT,
             "index past the end refused"))
    return 3;
  stats(r, "list");
  oi_reader_close(r);
  free(sel);
  free(buf);
  return rc == OI_NO_MATCH ? 1 : 0;
}
