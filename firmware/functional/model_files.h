// Internal to firmware/functional/: the weight-file readers and writers (llama2c_file.cpp,
// safetensors_file.cpp) and the helpers they share with llama_model.cpp.
#pragma once

#include "firmware/functional/llama_weights.h"

#include <cstdint>
#include <string>

namespace kelle::fn::model_files {

// Throws model_file_error("<path>: <what>").
[[noreturn]] void bad(const std::string& path, const std::string& what);
std::string read_file(const std::string& path);
// Whether the file's first bytes are a safetensors header (the format is told by the content).
bool is_safetensors(const std::string& bytes);
// Every dimension at least 1, dim a multiple of heads, heads of kv_heads, an even head dimension.
void check_config(const std::string& path, const llama_config& c);

// llama2.c (run.c's format): the header's shape, the float32 count after the header, the weights.
llama_config llama2c_config(const std::string& path, const std::string& bytes);
std::uint64_t llama2c_floats(const llama_config& c);
llama_weights load_llama2c(const std::string& path, const std::string& bytes);

// safetensors with Hugging Face Llama names: the shape (tensors and config), the weights.
llama_config st_config(const std::string& path, const std::string& bytes);
llama_weights load_st(const std::string& path, const std::string& bytes);

}  // namespace kelle::fn::model_files
