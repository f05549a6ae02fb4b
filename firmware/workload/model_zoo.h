// The shapes of the LLMs the firmware runs: the public configurations of the models the paper
// evaluates (spec section 6), chosen by name (`kelle-vp list models`), or a custom shape given
// in the scenario. Sizes follow from the shape and the KV cache's number format: weights are
// int8, activations 16-bit, the KV cache in `kv` (policy.kv_format: binary16 unless a run sets it).
// Shapes may have sliding-window layers, latent KV (multi-head latent attention) and mixture-of-
// experts FFNs (docs/models/model-zoo.md); the firmware runs them (not_yet_run(): the few
// combinations it does not).
#pragma once

#include "firmware/workload/model_shape.h"
#include "platform/config/config.h"
#include "platform/registry/registry.h"

#include <string>

namespace kelle {

using model_registry = registry<model_shape>;
model_registry& models();

// `workload.model`: a built-in name, or a map with every field of a custom shape.
model_shape model_from_config(const config_node& workload);
// As model_from_config, refusing (an error on workload.model) a shape the firmware does not run
// yet (model_shape::not_yet_run), with the run's kernel choices (workload.latent_attention): a
// run, a check and the estimate use it.
model_shape runnable_model_from_config(const config_node& workload);
// The weights file `workload.model` names (resolved against the folder of the file that set it,
// as include is), or "" when it names a model of the zoo or a shape.
std::string weights_file_of(const config_node& workload);

}  // namespace kelle
