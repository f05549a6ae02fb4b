// `ideal`: a what-if memory with a fixed latency and unlimited bandwidth. Every access, of any
// size and any number at once, completes `latency_ns` after it starts. It consumes no energy
// unless `energy_pJ_per_byte` is set. See docs/models/memory-ideal.md.
#include "models/memory/memory_target.h"

namespace kelle {
namespace {

class ideal : public memory_target {
 public:
  ideal(const sc_core::sc_module_name& n, const memory_args& a)
      : memory_target(n, a),
        m_latency(sc_core::sc_time(a.params.get_double("latency_ns", 0.0, "access latency in ns", 0.0),
                                   sc_core::SC_NS)),
        m_energy_J_per_B(a.params.get_double("energy_pJ_per_byte", 0.0,
                                             "energy per byte accessed in pJ", 0.0) *
                         1e-12) {
    m_stats.energy(energy_kind::access, "access", "bytes accessed x energy per byte", [this] {
      return (m_bytes_read.value() + m_bytes_written.value()) * m_energy_J_per_B;
    });
  }
  double peak_bandwidth_Bps() const override { return std::numeric_limits<double>::infinity(); }
  double read_energy_J_per_byte() const override { return m_energy_J_per_B; }

 protected:
  sc_core::sc_time service(tlm::tlm_command, std::uint64_t, std::uint64_t,
                           const sc_core::sc_time& start) override {
    return start + m_latency;
  }

 private:
  sc_core::sc_time m_latency;
  double m_energy_J_per_B;
};

KELLE_REGISTER(memories(), "ideal", "fixed latency, unlimited bandwidth (what-if studies)",
               [](const memory_args& a) -> std::unique_ptr<memory_target> {
                 return std::make_unique<ideal>(a.name.c_str(), a);
               });

}  // namespace
}  // namespace kelle
