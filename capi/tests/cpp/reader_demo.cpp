// The handle API from C++ (c++ -std=c++17 -Wall -Wextra -Werror -pedantic), linked to the
// shared library: the same protocol as tests/c/reader_demo.c, but the reader maps the file
// itself (oi_reader_open_file) and lives in a std::unique_ptr.
//
//   reader_demo_cpp FILE OUTDIR TARGET...
#include "offload_image.h"

#include <cstdio>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace {

struct Close {
  void operator()(oi_reader *r) const { oi_reader_close(r); }
};
using Reader = std::unique_ptr<oi_reader, Close>;

std::string_view view(oi_str s) { return {s.data, s.len}; }

struct Failure : std::runtime_error {
  int status;
  Failure(const std::string &what, int status) : std::runtime_error(what), status(status) {}
};

void ok(int32_t rc, const oi_error &err, const char *what) {
  if (rc != OI_OK && rc != OI_NO_MATCH)
    throw Failure(std::string(what) + ": " + std::string(view(err.message)) + " (" +
                      oi_status_name(rc) + ")",
                  2);
}

void expect(bool cond, const char *what) {
  if (!cond) throw Failure(std::string("check failed: ") + what, 3);
}

void stats(const oi_reader *r, const char *phase) {
  oi_reader_stats s{};
  oi_reader_get_stats(r, &s);
  std::printf("stats\t%s\t%llu\t%llu\t%llu\n", phase, (unsigned long long)s.decode_passes,
              (unsigned long long)s.decoded_bytes, (unsigned long long)s.held_bytes);
}

std::string_view bytes_of(const oi_reader *r, size_t i, const oi_image_info &info) {
  oi_error err{};
  const uint8_t *data = nullptr;
  size_t len = 0;
  ok(oi_reader_image_data(r, i, &data, &len, &err), err, "image_data");
  const uint8_t *again = nullptr;
  size_t again_len = 0;
  ok(oi_reader_image_data(r, i, &again, &again_len, &err), err, "image_data");
  expect(again == data && again_len == len, "the same bytes twice");
  expect(len == info.size, "size");
  return {reinterpret_cast<const char *>(data), len};
}

void write(const std::string &path, std::string_view bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!f) throw Failure("cannot write " + path, 2);
}

std::string offset_of(const oi_image_info &info) {
  return info.offset == OI_NO_OFFSET ? "-" : std::to_string(info.offset);
}

int run(int argc, char **argv) {
  const std::string dir = argv[2];
  std::vector<const char *> targets(argv + 3, argv + argc);
  oi_error err{};
  Reader r(oi_reader_open_file(argv[1], nullptr, &err));
  if (!r) ok(err.code, err, "open");
  stats(r.get(), "open");

  const size_t units = oi_reader_unit_count(r.get());
  for (size_t u = 0; u < units; u++) {
    oi_unit_info ui{};
    ok(oi_reader_unit(r.get(), u, &ui, &err), err, "unit");
    std::printf("unit\t%zu\t%llu\t%u\t%s\n", u, (unsigned long long)ui.index_in_container,
                ui.compression, std::string(view(ui.location)).c_str());
  }

  const size_t n = targets.size();
  std::vector<oi_selection> sel(units * n);
  const int32_t rc =
      oi_reader_select(r.get(), targets.data(), n, nullptr, sel.data(), sel.size(), &err);
  ok(rc, err, "select");
  stats(r.get(), "select");
  for (size_t u = 0; u < units; u++) {
    for (size_t t = 0; t < n; t++) {
      const oi_selection &s = sel[u * n + t];
      if (!s.found) {
        expect(s.image == OI_NO_IMAGE, "no image");
        std::printf("select\t%zu\t%s\t-\t-\t-\t-\n", u, targets[t]);
        continue;
      }
      oi_image_info info{};
      ok(oi_reader_image(r.get(), s.image, &info, &err), err, "image");
      expect(info.unit == u, "chosen image is in its unit");
      write(dir + "/sel-" + std::to_string(u) + "-" + std::to_string(t) + ".bin",
            bytes_of(r.get(), s.image, info));
      std::printf("select\t%zu\t%s\t%s\t%s\t%llu\t%zu\n", u, targets[t],
                  std::string(view(info.name)).c_str(), offset_of(info).c_str(),
                  (unsigned long long)info.size, s.image);
    }
  }
  stats(r.get(), "data");

  size_t count = 0;
  ok(oi_reader_image_count(r.get(), &count, &err), err, "image_count");
  for (size_t i = 0; i < count; i++) {
    oi_image_info info{};
    ok(oi_reader_image(r.get(), i, &info, &err), err, "image");
    write(dir + "/img-" + std::to_string(i) + ".bin", bytes_of(r.get(), i, info));
    std::printf("image\t%zu\t%zu\t%zu\t%s\t%s\t%llu\t%s\t%s\t%s\t%u\n", i, info.unit,
                info.index, std::string(view(info.name)).c_str(), offset_of(info).c_str(),
                (unsigned long long)info.size, std::string(view(info.offload_kind)).c_str(),
                std::string(view(info.triple)).c_str(), std::string(view(info.target)).c_str(),
                info.image_kind);
  }
  oi_image_info none{};
  expect(oi_reader_image(r.get(), count, &none, &err) == OI_ERR_INVALID_ARGUMENT,
         "index past the end refused");
  stats(r.get(), "list");
  return rc == OI_NO_MATCH ? 1 : 0;
}

}  // namespace

int main(int argc, char **argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s FILE OUTDIR TARGET...\n", argv[0]);
    return 2;
  }
  try {
    return run(argc, argv);
  } catch (const Failure &f) {
    std::fprintf(stderr, "%s\n", f.what());
    return f.status;
  }
}
