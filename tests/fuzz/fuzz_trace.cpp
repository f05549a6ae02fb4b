// Fuzz target: the attention-trace reader (firmware/workload/attention/trace_source.cpp). The
// input is a .katt file; a rejection must be a std::runtime_error naming the file.
#include "firmware/workload/attention/trace_source.h"

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::string path = "/tmp/kelle-fuzz-trace-" + std::to_string(::getpid()) + ".katt";
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return 0;
  std::fwrite(data, 1, size, f);
  std::fclose(f);
  try {
    const kelle::attention_trace t = kelle::attention_trace::read(path);
    // every value the replay can index
    if (!t.logits.empty()) (void)t.logits[t.index(t.sequences - 1, t.layers - 1, t.heads - 1, t.tokens - 1, t.tokens - 1)];
  } catch (const std::runtime_error&) {
  }
  return 0;
}
