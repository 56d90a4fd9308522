// Scenarios defined outside mp_test.cpp, run through its table.
#pragma once

int scenario_rma();
int scenario_rma_errors();
int scenario_rma_stale();
int scenario_rma_farewell();
int scenario_rma_threads();
int scenario_rma_notes();
int scenario_rma_big();
int scenario_graph();
int scenario_lists();
