// SPDX-License-Identifier: BSD-3-Clause
// weft-info's three forms: text for people, JSON for scripts, and the Markdown tables of
// docs/configuration.md (the document is this output; a test compares them).
#pragma once

#include <cstdio>

namespace weft_info {

void print_text(FILE* out);
void print_json(FILE* out);
void print_settings_markdown(FILE* out);

}  // namespace weft_info
