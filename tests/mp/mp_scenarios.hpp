// SPDX-License-Identifier: BSD-3-Clause
// Scenarios defined outside mp_test.cpp, run through its table.
#pragma once

int scenario_rma();
int scenario_rma_alloc();
int scenario_ack_past_held();
int scenario_alloc();
int scenario_alloc_mapped();
int scenario_rma_errors();
int scenario_rma_forged();
int scenario_rma_stale();
int scenario_rma_farewell();
int scenario_rma_threads();
int scenario_rma_notes();
int scenario_rma_big();
int scenario_graph();
int scenario_lists();
int scenario_burst(bool am);
int scenario_hole();
int scenario_foreign();
int scenario_foreign_rmr();
int scenario_late_device();
int scenario_quiet_peer();
int scenario_expel();
int scenario_exit_on_death();
int scenario_idle();
int scenario_runtimes_free();
int scenario_am_in_flight();
int scenario_dereg_free();
int scenario_rma_to_dead();
int scenario_drop_flood();
int scenario_rts_from_dead();
int scenario_rts_race_death();
int scenario_send_race_death();
int scenario_recv_race_death();
int scenario_first_transfer();
int scenario_no_defaults();
int scenario_loaded();
int scenario_mechanism();
int scenario_busy_target();
int scenario_peers_progress();
int scenario_rma_burst();
int scenario_blocking();
int scenario_cont();
int scenario_ahead();
int scenario_ahead_to_dead();
int scenario_pieces();
