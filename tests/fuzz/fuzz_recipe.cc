// libFuzzer target: the recipe parser (sparq/recipe.h).
//
// Any text must give a Recipe or an error Status, never a crash, a hang or a
// huge allocation. The first byte picks how much is checked: bit 0 adds two
// --set overrides taken from the first line (KEY=VALUE syntax and list
// indices are parsed too); a recipe that parses must print
// (RecipeToYaml) to YAML that parses again to the same YAML.
#include <cstddef>
#include <cstdint>
#include <string>

#include "sparq/recipe.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0 || size > 64 * 1024) return 0;
  const uint8_t mode = data[0];
  std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  sparq::RecipeParseOptions options;
  options.check_files = false;
  if (mode & 1) {
    const size_t eol = text.find('\n');
    const std::string line = text.substr(0, eol);
    options.overrides = {line, "quantize.layers[0].precision=fp16"};
    text = eol == std::string::npos ? std::string() : text.substr(eol + 1);
  }
  auto recipe = sparq::ParseRecipe(text, "/nonexistent-base", "fuzz.yaml", options);
  if (!recipe.ok()) return 0;
  const std::string printed = sparq::RecipeToYaml(*recipe);
  sparq::RecipeParseOptions again_options;
  again_options.check_files = false;
  // (The same source name: the printed header names it.)
  auto again = sparq::ParseRecipe(printed, "/nonexistent-base", "fuzz.yaml", again_options);
  if (!again.ok() || sparq::RecipeToYaml(*again) != printed) __builtin_trap();
  return 0;
}
