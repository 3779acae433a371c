/*
 * offload_image.h — C API of offload-image for runtime plugins and loaders.
 *
 * Reads clang offload bundles, compressed bundles (CCOB) and LLVM OffloadBinaries, also
 * inside ELF files and ar archives, in place, and selects the image to load on a device
 * by the target-ID compatibility rules. Link with -loffload_image (static or shared).
 *
 * Memory: the library never returns memory the caller must free. Every output goes to
 * storage the caller passes in; images stored uncompressed are reported as an offset and a
 * size inside the caller's buffer; oi_extract copies image bytes (also of compressed
 * bundles) into a caller buffer.
 *
 * All functions are thread-safe and never abort on malformed input.
 */
#ifndef OFFLOAD_IMAGE_H
#define OFFLOAD_IMAGE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Status codes. OI_OK and OI_NO_MATCH are outcomes; the others are errors, with their
 * byte offset and message in oi_error. */
#define OI_OK 0                    /* success */
#define OI_NO_MATCH 1              /* some unit has no image compatible with the device */
#define OI_ERR_TRUNCATED 2         /* data ends inside a header, table or payload */
#define OI_ERR_OUT_OF_BOUNDS 3     /* an offset/size points outside the data, or overflows */
#define OI_ERR_BAD_MAGIC 4         /* not an offload container */
#define OI_ERR_UNSUPPORTED_VERSION 5
#define OI_ERR_UNSUPPORTED_METHOD 6 /* unknown compression method or enumerated value */
#define OI_ERR_SIZE_MISMATCH 7
#define OI_ERR_HASH_MISMATCH 8     /* the truncated MD5 of a compressed bundle is wrong */
#define OI_ERR_LIMIT_EXCEEDED 9    /* a resource limit (size, count, depth) was hit */
#define OI_ERR_DECOMPRESS 10       /* corrupt compressed stream */
#define OI_ERR_MALFORMED 11        /* internally inconsistent structure */
#define OI_ERR_INVALID_ID 12       /* bad bundle entry ID, target ID or triple */
#define OI_ERR_BAD_CONTAINER 13    /* malformed ELF file or archive */
#define OI_ERR_OUT_OF_MEMORY 14
#define OI_ERR_INVALID_ARGUMENT 15 /* null pointer, bad target string, bad index */
#define OI_ERR_BUFFER_TOO_SMALL 16 /* the caller's buffer cannot hold the result */
#define OI_ERR_INTERNAL 17

/* Offset reported for an image that is stored compressed (not present in the buffer). */
#define OI_NO_OFFSET UINT64_MAX

/* Image formats (oi_image.format). */
#define OI_FORMAT_BUNDLE 0
#define OI_FORMAT_TEXT_BUNDLE 1
#define OI_FORMAT_OFFLOAD_BINARY 2
#define OI_FORMAT_ELF 3

/* Selection policies (oi_select_options.policy). */
#define OI_POLICY_BEST 0           /* native, exact features, newest generic, then order */
#define OI_POLICY_FIRST 1          /* first compatible in discovery order (comgr, LLVM offload) */
#define OI_POLICY_FIRST_BY_CLASS 2 /* native, then generic, then JIT, each in order (ROCm CLR) */

/* Offload kind filters (oi_select_options.kind). */
#define OI_KIND_ANY 0
#define OI_KIND_HIP 1
#define OI_KIND_OPENMP 2
#define OI_KIND_CUDA 3

/* Error details. */
typedef struct oi_error {
  int32_t code;        /* one of the OI_ERR_* codes, or OI_OK */
  uint64_t offset;     /* byte offset of the problem in the caller's buffer */
  char message[256];   /* NUL-terminated, e.g. "bundle entry payload runs past the end of the data, at byte 86" */
} oi_error;

/* One image. Strings are NUL-terminated and truncated to fit. */
typedef struct oi_image {
  uint32_t unit;         /* unit index in discovery order (one bundle, one section's OffloadBinaries, ...) */
  uint32_t index;        /* image index within its unit (header order) */
  uint32_t format;       /* OI_FORMAT_* */
  uint32_t compressed;   /* 1 if the image is inside a compressed bundle */
  uint64_t offset;       /* offset in the caller's buffer, or OI_NO_OFFSET */
  uint64_t size;         /* image size in bytes */
  char id[256];          /* bundle entry ID, or "<triple>--<arch>" for OffloadBinaries and bare ELF */
  char target[96];       /* canonical target ID ("gfx90a:xnack+", "sm_90a"), empty if none */
} oi_image;

/* Selection options; zero-initialised means: best policy, any kind, hash verified. */
typedef struct oi_select_options {
  uint32_t policy;          /* OI_POLICY_* */
  uint32_t kind;            /* OI_KIND_* */
  uint32_t skip_hash_check; /* 1: do not verify compressed bundles' truncated MD5 */
  uint32_t reserved;        /* must be 0 */
} oi_select_options;

/* The result of a selection for one unit. */
typedef struct oi_selection {
  uint32_t found;  /* 1 if an image was selected for this unit */
  uint32_t tie;    /* 1 if another compatible image ranked equal (order decided) */
  oi_image image;  /* the selected image (valid when found) */
} oi_selection;

/* Lists the images of data[0..len). Writes up to capacity records to images (may be NULL
 * when capacity is 0) and the total number of images to *count.
 * Returns OI_OK, OI_ERR_BUFFER_TOO_SMALL (count says how many are needed) or an error. */
int32_t oi_list(const uint8_t *data, size_t len, oi_image *images, size_t capacity,
                size_t *count, oi_error *error);

/* Selects, for every unit of data[0..len), the image to load on the device `target`
 * ("gfx90a:sramecc+:xnack-", "amdgcn-amd-amdhsa--gfx1100", "sm_90"). Writes up to capacity
 * results, one per unit in discovery order, and the number of units to *units.
 * options may be NULL (defaults). Returns OI_OK when every unit has an image, OI_NO_MATCH
 * when some unit has none, OI_ERR_BUFFER_TOO_SMALL, or an error. */
int32_t oi_select(const uint8_t *data, size_t len, const char *target,
                  const oi_select_options *options, oi_selection *results, size_t capacity,
                  size_t *units, oi_error *error);

/* Copies the bytes of image `index` of unit `unit` into out[0..capacity) and sets *size to
 * the image size (also when the buffer is too small: OI_ERR_BUFFER_TOO_SMALL).
 * Works for compressed bundles too (the bundle is decompressed into internal memory that is
 * freed before returning). options may be NULL. */
int32_t oi_extract(const uint8_t *data, size_t len, uint32_t unit, uint32_t index,
                   const oi_select_options *options, uint8_t *out, size_t capacity,
                   size_t *size, oi_error *error);

/* A static string naming a status code ("ok", "no-match", "truncated", ...). */
const char *oi_status_name(int32_t code);

#ifdef __cplusplus
}
#endif

#endif /* OFFLOAD_IMAGE_H */
