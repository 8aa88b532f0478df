// What the report's page (report.cc), its figures (report_figures.cc, report_arrival.cc) and its
// tables (report_tables.cc) share: units, a row's gates in words, a trial's verdict in words, the
// boundary a row's figures and tables centre on, and the ids the page's hooks are made of.
// Private to the report layer.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "capq/qualify/deciding_gate.h"
#include "capq/record/capacity_data.h"
#include "capq/text.h"

namespace capq::report {

// Durations in the unit that reads best for a bound: seconds when it is a second or more.
using Unit = GateUnit;
Unit UnitFor(double below_ms);

// The first gate's bound; NaN for a row without gates.
double Slo(const RowInfo& r);
// The row's TTFT gate, the one the TTFT figures draw as their SLO line; nullptr when it has none.
const SloGate* TtftGate(const RowInfo& r);
// The unit of the TTFT figures and columns: the TTFT gate's, else the first gate's.
Unit TtftUnit(const RowInfo& r);

// "p95 ttft < 2500 ms": one gate as the row states it.
std::string GateSpec(const SloGate& g);
// Every gate of the row joined by "and"; "none" for a row without gates.
std::string SloText(const RowInfo& r);
// "512 / 128": input and output tokens.
std::string Shape(const RowInfo& r);

// The level the row's figures and tables centre on: the proven maximum, or a lowered row's
// operating point; nullopt when the row has neither.
std::optional<int> Boundary(const RowQualification& q);

// "pass", "fail" or "other": the class a trial's point, bar or cell is drawn with.
std::string VerdictClass(const TrialSummary& t);
// "pass", "fail", or the outcome's own name.
std::string VerdictWord(const TrialSummary& t);
// The gate that decided a trial against its bound ("itl p95 55.1 ms >= 50.0 ms", or on a rate
// row a stability gate's failure); for a broken stream the correctness gate; empty when neither.
std::string DecidedBy(const TrialSummary& t);
// "fail (itl p95 55.1 ms >= 50.0 ms)": a trial's verdict with the gate that decided it.
std::string VerdictTip(const TrialSummary& t);

// "<prefix>-<row>", the row's id with anything but letters, digits and '_' as '_'.
std::string Id(const std::string& prefix, const std::string& row);

// Jitter so several trials at one C stay visible side by side.
double Jitter(int index, int count, double width = 0.14);

// Whether any row of the data is a rate row.
bool AnyRateRow(const CapacityData& d);

// Figures (report_figures.cc). Figure 1, the TTFT figure and Figure 4 are one row's; Figures 2
// and 3 span every row.
std::string FigTtft(const RowQualification& q);
std::string FigThroughput(const RowQualification& q);
std::string FigTimeline(const RowQualification& q);
std::string FigBoundary(const CapacityData& d);
// Figure 3 (report_surface.cc): the capacity surface across rows, and across servers when the
// data merges qualifications of more than one.
std::string FigSurface(const CapacityData& d);
// The server a row was qualified on, as a merged report tells servers apart: the engine with its
// image (or the simulator's profile and time scale), the hardware, and the URL.
std::string ServerName(const RowQualification& q);

// The confirmation trials over their measured interval (report_arrival.cc): TTFT by arrival order
// with its table, and on a rate row the queue over time. Empty for a row without a boundary.
std::string FigArrival(const RowQualification& q);
std::string FigQueue(const RowQualification& q);

// Tables (report_tables.cc): one row's, then those that span every row.
std::string TblBoundary(const RowQualification& q);
std::string TblPrediction(const RowQualification& q);
std::string TblLocate(const RowQualification& q);
std::string TblCost(const RowQualification& q);
std::string TblOverview(const CapacityData& d);
std::string TblRows(const CapacityData& d);
std::string TblMaxPass(const CapacityData& d);
std::string TblCorrectness(const CapacityData& d);

}  // namespace capq::report
