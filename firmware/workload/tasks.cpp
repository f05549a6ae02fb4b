#include "firmware/workload/tasks.h"

#include <memory>

namespace kelle {

task_registry& tasks() {
  static task_registry r("tasks", "the paper's workloads (workload.task): lengths, batch, KV budget");
  return r;
}

namespace {

void add(const char* name, const char* what, task_spec t) {
  tasks().add(name, what, [t] { return std::make_unique<task_spec>(t); });
}

// Spec section 4: batch 16; (context, decode) per task; budget N' (recent window) per task.
const bool registered = [] {
  add("lambada", "LAMBADA: 128 + 512 tokens, batch 16, N' 128 (window 64)", {128, 512, 16, 128, 64});
  add("triviaqa", "TriviaQA: 512 + 2048 tokens, batch 16, N' 1024 (window 512)", {512, 2048, 16, 1024, 512});
  add("qasper", "Qasper: 1024 + 5120 tokens, batch 16, N' 1024 (window 512)", {1024, 5120, 16, 1024, 512});
  add("pg19", "PG19: 512 + 8192 tokens, batch 16, N' 2048 (window 1024)", {512, 8192, 16, 2048, 1024});
  return true;
}();

}  // namespace
}  // namespace kelle
