// A memory manager for generic payloads (tlm_mm_interface): payloads are reused, not allocated
// per transaction. Each payload owns a data buffer of at least the requested size. Sticky
// extensions stay on a payload across reuse; the owning initiator sets or clears them.
#pragma once

#include <tlm>

#include <cstdint>
#include <memory>
#include <vector>

namespace kelle {

class payload_pool : public tlm::tlm_mm_interface {
 public:
  payload_pool() = default;
  payload_pool(const payload_pool&) = delete;
  payload_pool& operator=(const payload_pool&) = delete;
  ~payload_pool() override;

  // A reset payload with reference count 1 and a data buffer of `data_bytes` bytes.
  tlm::tlm_generic_payload* acquire(std::size_t data_bytes);
  void free(tlm::tlm_generic_payload* p) override;
  std::size_t allocated() const { return m_all.size(); }

 private:
  struct pooled : tlm::tlm_generic_payload {
    explicit pooled(tlm::tlm_mm_interface* mm) : tlm::tlm_generic_payload(mm) {}
    std::vector<unsigned char> data;
  };
  std::vector<std::unique_ptr<pooled>> m_all;
  std::vector<pooled*> m_free;
};

}  // namespace kelle
