/* Reasons, damage and errors through the C API (cc -std=c11 -Wall -Wextra -Werror -pedantic).
 *
 *   explain_demo [--file] FILE TARGET...
 *
 * Opens FILE (read into memory and oi_reader_open, or with --file oi_reader_open_file),
 * then, before any other call, asks every unit's status; selects for all TARGETs in one
 * call; then explains every (unit, target) pair. Prints tab-separated lines that
 * tests/suite/c_api.rs compares with loader-sim select --explain:
 *   open     <status name> <code> <os_error> <os_message> <offset|-> <message>   (on failure)
 *   version  <oi_version()> <OI_VERSION_MAJOR.MINOR.PATCH>
 *   status   <u> <status name> <offset|-> <index|->
 *   unit     <u> <location> <index in container> <first image> <image count>
 *   select   <status name> <error status name> <offset|-> <index|->
 *   choice   <u> <target> <found> <image name|->
 *   summary  <u> <target> <status name> <reason name> <image name|-> <text>
 *   loss     <u> <target> <image name> <reason name> <text>
 * Strings from the file are printed with bytes below 0x20, 0x7f and '\' as \xNN.
 * Exit status: 0, or 2 when the open fails, 3 when a check fails. */
#include "offload_image.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void put(const oi_str *s) {
  for (size_t i = 0; i < s->len; i++) {
    unsigned char c = (unsigned char)s->data[i];
    if (c < 0x20 || c == 0x7f || c == '\\')
      printf("\\x%02x", c);
    else
      putchar(c);
  }
}

static void num(uint64_t v, uint64_t none) {
  if (v == none)
    printf("-");
  else
    printf("%llu", (unsigned long long)v);
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
  unsigned char *buf = (unsigned char *)malloc(n > 0 ? (size_t)n : 1);
  if (buf && n > 0 && fread(buf, 1, (size_t)n, f) != (size_t)n) {
    free(buf);
    buf = NULL;
  }
  fclose(f);
  *len = n > 0 ? (size_t)n : 0;
  return buf;
}

/* The name of image i, or "-". */
static void image_name(const oi_reader *r, size_t i) {
  oi_image_info info;
  oi_error err;
  if (i == OI_NO_IMAGE || oi_reader_image(r, i, &info, &err) != OI_OK)
    printf("-");
  else
    put(&info.name);
}

int main(int argc, char **argv) {
  int a = 1, use_file = 0;
  if (a < argc && strcmp(argv[a], "--file") == 0) {
    use_file = 1;
    a++;
  }
  if (argc - a < 1) {
    fprintf(stderr, "usage: %s [--file] FILE TARGET...\n", argv[0]);
    return 2;
  }
  const char *path = argv[a++];
  const char *const *targets = (const char *const *)&argv[a];
  size_t n = (size_t)(argc - a);

  printf("version\t%s\t%d.%d.%d\n", oi_version(), OI_VERSION_MAJOR, OI_VERSION_MINOR,
         OI_VERSION_PATCH);
  oi_error err;
  unsigned char *buf = NULL;
  size_t len = 0;
  oi_reader *r;
  if (use_file) {
    r = oi_reader_open_file(path, NULL, &err);
  } else {
    buf = read_file(path, &len);
    if (!buf) return 2;
    r = oi_reader_open(buf, len, NULL, &err);
  }
  if (!r) {
    printf("open\t%s\t%d\t%d\t", oi_status_name(err.code), err.code, err.os_error);
    put(&err.os_message);
    printf("\t");
    num(err.offset, OI_NO_OFFSET);
    printf("\t");
    put(&err.message);
    printf("\n");
    if (!check(strlen(err.message.data) == err.message.len, "message length")) return 3;
    if (err.os_error != 0 &&
        !check(strcmp(err.os_message.data, strerror(err.os_error)) == 0, "strerror text"))
      return 3;
    free(buf);
    return 2;
  }

  /* Before any other call: each unit's status (a compressed unit is checked now). */
  size_t units = oi_reader_unit_count(r);
  for (size_t u = 0; u < units; u++) {
    int32_t st = oi_reader_unit_status(r, u, &err);
    printf("status\t%zu\t%s\t", u, oi_status_name(st));
    num(err.offset, OI_NO_OFFSET);
    printf("\t");
    num(err.index, OI_NO_INDEX);
    printf("\n");
  }

  oi_selection *sel = (oi_selection *)calloc(units * n + 1, sizeof *sel);
  int32_t rc = n ? oi_reader_select(r, targets, n, NULL, sel, units * n, &err) : OI_OK;
  printf("select\t%s\t%s\t", oi_status_name(rc), oi_status_name(err.code));
  num(err.offset, OI_NO_OFFSET);
  printf("\t");
  num(err.index, OI_NO_INDEX);
  printf("\n");
  if (rc != OI_OK && rc != OI_NO_MATCH && rc != OI_PARTIAL) {
    oi_reader_close(r);
    free(sel);
    free(buf);
    return 2;
  }

  for (size_t u = 0; u < units; u++) {
    oi_unit_info ui;
    size_t first = 0, count = 0;
    if (oi_reader_unit(r, u, &ui, &err) != OI_OK ||
        oi_reader_unit_images(r, u, &first, &count, &err) != OI_OK)
      return 3;
    printf("unit\t%zu\t", u);
    put(&ui.location);
    printf("\t%llu\t%zu\t%zu\n", (unsigned long long)ui.index_in_container, first, count);
    for (size_t i = first; i < first + count; i++) {
      oi_image_info info;
      if (!check(oi_reader_image(r, i, &info, &err) == OI_OK && info.unit == u,
                 "the unit's images are its own"))
        return 3;
    }
  }

  for (size_t u = 0; u < units; u++) {
    for (size_t t = 0; t < n; t++) {
      const oi_selection *s = &sel[u * n + t];
      printf("choice\t%zu\t%s\t%u\t", u, targets[t], s->found);
      image_name(r, s->image);
      printf("\n");

      /* First the count alone, then the reasons into an array of that size. */
      oi_reason summary;
      size_t lost = 0;
      int32_t ex = oi_reader_explain(r, u, targets[t], NULL, &summary, NULL, 0, &lost, &err);
      oi_reason *losses = (oi_reason *)calloc(lost + 1, sizeof *losses);
      size_t again = 0;
      int32_t ex2 =
          oi_reader_explain(r, u, targets[t], NULL, &summary, losses, lost, &again, &err);
      if (!check(ex == ex2 && again == lost, "the same explanation twice")) return 3;
      if (!check(ex != OI_OK || (s->found && summary.image == s->image),
                 "the explained choice is the selection's"))
        return 3;
      printf("summary\t%zu\t%s\t%s\t%s\t", u, targets[t], oi_status_name(ex),
             oi_reason_name(summary.kind));
      image_name(r, summary.image);
      printf("\t");
      put(&summary.text);
      printf("\n");
      for (size_t k = 0; k < lost; k++) {
        printf("loss\t%zu\t%s\t", u, targets[t]);
        image_name(r, losses[k].image);
        printf("\t%s\t", oi_reason_name(losses[k].kind));
        put(&losses[k].text);
        printf("\n");
      }
      free(losses);
    }
  }
  oi_reader_close(r);
  free(sel);
  free(buf);
  return 0;
}
