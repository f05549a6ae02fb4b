// Fuzz target: the llama2.c checkpoint reader (firmware/functional/llama2c_file.cpp): the header,
// the size arithmetic and the weights. A rejection must be a model_file_error.
#include "firmware/functional/model_files.h"

#include <cstddef>
#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  try {
    kelle::fn::model_files::load_llama2c("fuzz.bin", bytes);
  } catch (const kelle::fn::model_file_error&) {
  }
  return 0;
}
