// A trained model's attention over a text, as an attention trace (.katt) that timing mode
// replays (`workload.attention.type: trace`) and scripts/attention-stats measures: the reference
// model (fp32 arithmetic on the int8 weights the platform runs, full cache) steps through
// `sequences` consecutive windows of `tokens` tokens of the text (window s starts at token
// s x tokens, BOS first, as functional mode's teacher-forced sequences), and each query head's
// pre-softmax logits q . k / sqrt(head_dim) over keys 0 .. t become the trace's rows.
// docs/attention.md.
#pragma once

#include "firmware/workload/attention/trace_source.h"

#include <cstdint>
#include <string>

namespace kelle::fn {

struct attention_export_args {
  std::string model;      // weights file (safetensors or llama2.c)
  std::string text;       // the text
  std::string tokenizer;  // llama2.c tokenizer.bin
  std::uint32_t tokens = 1024;
  unsigned sequences = 1;
};

// Throws model_file_error (a bad weights or tokenizer file: the message starts with its name) or
// std::runtime_error (a text too short or unreadable, naming the file).
attention_trace export_attention(const attention_export_args& a);

}  // namespace kelle::fn
