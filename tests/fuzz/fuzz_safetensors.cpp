// Fuzz target: the safetensors reader (firmware/functional/safetensors_file.cpp): the header
// length, its JSON, the tensors' shapes, dtypes and offsets. A rejection must be a
// model_file_error. The file is named in a folder that holds no config.json.
#include "firmware/functional/model_files.h"

#include <cstddef>
#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  if (!kelle::fn::model_files::is_safetensors(bytes)) return 0;
  try {
    kelle::fn::model_files::load_st("/nonexistent-kelle-fuzz/model.safetensors", bytes);
  } catch (const kelle::fn::model_file_error&) {
  }
  return 0;
}
