// The functional arithmetic of the compute blocks (docs/functional.md). In functional mode every
// RSA, SFU and DMA command also computes its results from real data: the engine reads the
// operands through a memory port (the interconnect's debug transport) when the block starts
// the command, and writes the results when the command's timing has completed. A scheduler that
// breaks a data dependency therefore computes on stale data.
//
// Numerics (the blocks' datapaths): 16-bit operands are IEEE binary16; the RSA multiplies int8
// weights (or 16-bit B) with 16-bit activations and accumulates in fp32, scales an int8 product
// by its output column's fp32 scale, and rounds the result to binary16; the SFU works in fp32
// between a binary16 input and a binary16 output.
//
// Layout: without a description a command's operands are dense, as its fields say (row-major,
// products back to back, the stacked rows of a gemm at addr_d). A `desc` attached to the
// command (by id) gives the operands as lists of pieces instead (a gather/scatter list per
// product), plus what the 64-byte descriptor has no field for: the weight scales, the softmax
// scale and mask, the norm weights, the RoPE positions. The firmware attaches them.
#pragma once

#include "models/compute/compute_block.h"

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <vector>

namespace kelle::fn {

// `n` consecutive elements of row `row` of an operand, from column `col`, stored at `addr`.
struct piece {
  std::uint32_t row = 0, col = 0, n = 0;
  std::uint64_t addr = 0;
};
using operand_map = std::vector<std::vector<piece>>;  // per product; empty: dense

struct desc {
  operand_map a, b, c;
  // gemm with int8 B: address of the n fp32 scales of the product's output columns (0: 1.0).
  std::uint64_t scales = 0;
  // gemm: add the products to the output's current values (read when the command starts) rather
  // than overwrite them, one rounding to binary16 at the end.
  bool accumulate = false;
  // gemm: pieces of the (gathered) A rows also written back as binary16 where the pieces say, as
  // the array reads them (per product; empty: none).
  operand_map keep_a;
  // copy: the byte ranges (source, destination, bytes) the command moves instead of its dense
  // copy (none: it moves nothing).
  struct move {
    std::uint64_t src = 0, dst = 0, bytes = 0;
  };
  std::vector<move> moves;
  // Called when the block starts the command, before its operands are read (checks).
  std::function<void()> on_start;
  // softmax: x -> softmax(scale x) over the elements [first[r], valid[r]) of row r (all rows of
  // all products in order; valid empty: the whole row, first empty: from 0); the other elements
  // become 0. on_row sees each row's probabilities (fp32, before rounding; the first valid[r],
  // masked ones 0).
  float scale = 1.0f;
  std::vector<std::uint32_t> valid, first;
  std::function<void(std::uint64_t row, const float* p, std::uint32_t n)> on_row;
  // rmsnorm: k binary16 weights at `gamma` (0: at addr_b), epsilon.
  std::uint64_t gamma = 0;
  float eps = 1e-5f;
  // rope: position of each row, base; without them addr_b holds (cos, sin) per element pair.
  // Columns before rope_from pass through; the rotation's dimension is k - rope_from (latent KV:
  // a head's query rotates only its RoPE part).
  std::vector<std::uint64_t> positions;
  float theta = 10000.0f;
  std::uint32_t rope_from = 0;
};

class memory_port {
 public:
  virtual ~memory_port() = default;
  virtual void read(std::uint64_t addr, void* dst, std::uint64_t len) = 0;
  virtual void write(std::uint64_t addr, const void* src, std::uint64_t len) = 0;
};

class engine : public functional_unit {
 public:
  explicit engine(memory_port& mem) : m_mem(mem) {}
  // The description of the command with this id (the driver's id), used once.
  void attach(std::uint32_t id, std::shared_ptr<const desc> d) { m_desc[id] = std::move(d); }
  void start(const compute_block& block, const command& c) override;
  void finish(const compute_block& block, const command& c) override;
  // Computes and writes a command at once (no block, no timing: tools and tests).
  void run(const command& c);
  std::uint64_t commands() const { return m_commands; }

 private:
  using writes = std::vector<std::pair<std::uint64_t, std::vector<unsigned char>>>;
  writes compute(const command& c);
  void gemm(const command& c, const desc* d, writes& w);
  void sfu(const command& c, const desc* d, writes& w);
  // Gathers a rows x cols matrix of binary16 elements as floats.
  std::vector<float> gather(const operand_map* map, std::size_t product, std::uint64_t base, std::uint64_t rows,
                            std::uint64_t cols);
  // The same into `v` (its storage reused).
  void gather(const operand_map* map, std::size_t product, std::uint64_t base, std::uint64_t rows, std::uint64_t cols,
              std::vector<float>& v);
  void scatter(const operand_map* map, std::size_t product, std::uint64_t base, std::uint64_t rows, std::uint64_t cols,
               const std::vector<float>& v, writes& w);

  memory_port& m_mem;
  std::map<std::uint32_t, std::shared_ptr<const desc>> m_desc;
  std::map<const compute_block*, std::map<std::uint32_t, writes>> m_pending;
  std::uint64_t m_commands = 0;
  // Scratch of gemm and gather (kept between commands: no allocation per command once grown).
  std::vector<float> m_a, m_b, m_bt, m_out;
  std::vector<std::int8_t> m_q;
  std::vector<std::uint16_t> m_half;
};

}  // namespace kelle::fn
