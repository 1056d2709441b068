// Reports of a run that stopped with an error (exit 2) under
// output.overwrite: report.json, junit.xml and report.md say so, so that no
// earlier run's reports stay behind looking like this run's result.
#pragma once

#include "sparq/recipe.h"
#include "sparq/status.h"

namespace sparq {

// Writes the recipe's report files (those it names) for a run that ended with
// `error`: report.json is the JSON error object of docs/sparq-json.schema.json
// (plus recipe and name), junit.xml one test case with an <error>, report.md
// the message. Best effort: returns the first write error, the caller keeps
// reporting `error`.
Status WriteErrorReports(const Recipe& recipe, const Status& error);

}  // namespace sparq
