// The command interface of the accelerator's compute blocks (RSA, SFU, systolic evictor).
//
// The firmware writes a 64-byte descriptor (`command`) with one TLM write to a block's command
// address (its base address in the map). The block queues it (at most `queue_depth`; a write to
// a full queue gets TLM_GENERIC_ERROR_RESPONSE), executes commands in order, and posts a
// `completion` (status, cycles, times) to its completion queue, notifying its completion event:
// an interrupt. Several blocks work at once; a malformed command completes with an error status
// and a log line, never a crash. Register map: docs/models/compute-commands.md.
#pragma once

#include "platform/tlm/traffic_class.h"

#include <systemc>

#include <cstdint>
#include <string>

namespace kelle {

enum class opcode : std::uint32_t {
  // RSA
  gemm = 1,             // C[m x n] = A[m x k] . B[k x n]; A 16-bit activations, B int8 weights
  gemm_transposed = 2,  // C[m x n] = A[m x k] . B[n x k]^T in place (q . K^T, B = K 16-bit)
  // SFU
  softmax = 16,
  exp = 17,
  gelu = 18,
  silu = 19,
  rmsnorm = 20,
  layernorm = 21,
  rope = 22,
  add = 23,
  mul = 24,
  min_search = 25,  // sequential minimum search over scores (the no-evictor configuration)
  // systolic evictor
  evict_select = 32,  // accumulate scores streamed by the RSA, pick each head's victim
  // DMA engine
  copy = 48,  // copy m x k bytes from addr_a to addr_c
};

std::string to_string(opcode op);

// command.flags bits.
// gemm_transposed: the score rows (q . K^T before softmax) are also streamed to the systolic
// evictor beside the array, which accumulates importance scores as they leave the PEs.
constexpr std::uint32_t flag_scores_to_evictor = 1u << 0;
// gemm: the stationary operand B is 16-bit (activations such as V in A . V), not int8 weights.
constexpr std::uint32_t flag_b_16bit = 1u << 1;
// RSA: the number format of the KV cache (models/compute/kv_format/kv_format.h) when it is not a
// 16-bit word: bits 2-4 the format's command code (kv_number_format::command_code(): 3 int8,
// 4 int4, ...), bits 5-8 log2 of its group size. It applies to operand
// b (the keys or values the attention reads) and operand c (a projection's new rows written into
// the cache) when their traffic class is kv: a row of n elements moves kv_format::row_bytes(n)
// bytes (codes and group scales) instead of 2n. 0: 16-bit (every operand as above).
constexpr unsigned flag_kv_format_shift = 2;
constexpr unsigned flag_kv_group_shift = 5;
// RSA: operand b is already in the array's operand buffer, where the block's previous command
// read it (a fused kernel's second use of the same data: latent attention's weighted sum over
// the latents its scores just read). The block moves none of b's bytes; its folds load from the
// buffer at once. addr_b still names the data (functional mode reads it there).
constexpr std::uint32_t flag_b_held = 1u << 9;
// Bits 16 to 31: the traffic class of each operand (a, b, c, d: 4 bits each, from bit 16), which
// the block's operand engine attaches to the operand's transactions (platform/tlm/traffic_class.h).
// 0 (unclassified) unless the firmware says.
constexpr unsigned operand_class_shift = 16;

// The descriptor. Fields a command does not use must be 0.
struct command {
  std::uint32_t id = 0;      // chosen by the firmware, echoed in the completion
  opcode op = opcode::gemm;
  std::uint32_t flags = 0;   // per opcode (see the register map)
  std::uint32_t m = 0;       // rows (tokens, or sequences x tokens)
  std::uint32_t k = 0;       // reduction length / row length
  std::uint32_t n = 0;       // output columns
  std::uint32_t extra = 0;   // per opcode: stacked recompute rows (gemm)
  std::uint32_t batch = 0;    // independent products of this shape, operands back to back (0 = 1)
  std::uint64_t addr_a = 0;  // first operand (activations / input vector)
  std::uint64_t addr_b = 0;  // second operand (weights / keys)
  std::uint64_t addr_c = 0;  // result
  std::uint64_t addr_d = 0;  // per opcode: stacked rows' inputs (gemm), scores (evictor)
};
static_assert(sizeof(command) == 64, "the descriptor is 64 bytes");

// Operands, by their index in command::flags' class bits and in operand_bytes().
enum operand : unsigned { operand_a = 0, operand_b = 1, operand_c = 2, operand_d = 3 };

// The traffic class of operand `o` of `c`.
inline traffic_class operand_class(const command& c, operand o) {
  return static_cast<traffic_class>((c.flags >> (operand_class_shift + 4 * o)) & 0xfu);
}
// Sets the traffic class of operand `o` of `c`.
inline void set_operand_class(command& c, operand o, traffic_class cls) {
  const unsigned shift = operand_class_shift + 4 * o;
  c.flags = (c.flags & ~(0xfu << shift)) | (static_cast<std::uint32_t>(cls) << shift);
}

enum class cmd_status : std::uint32_t {
  ok = 0,
  bad_opcode = 1,    // the block does not implement this opcode
  bad_shape = 2,     // a dimension is zero or too large
  bad_address = 3,   // an operand address is not mapped (error response from the interconnect)
  misaligned = 4,    // an operand address is not aligned to its element size
  memory_error = 5,  // any other error response while moving operands
};

std::string to_string(cmd_status s);

struct completion {
  std::uint32_t id = 0;
  opcode op = opcode::gemm;
  cmd_status status = cmd_status::ok;
  std::uint64_t cycles = 0;       // block cycles from start to finish
  sc_core::sc_time queued;        // the descriptor arrived
  sc_core::sc_time started;       // the block began it
  sc_core::sc_time finished;      // the completion was posted
};

}  // namespace kelle
