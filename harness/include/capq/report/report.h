// report.html from capacity data alone: one self-contained page (inline SVG + CSS, no scripts, no
// network, no web fonts) with the seed's figures and tables for every qualified row.
//
// Stable hooks for tests and readers (row ids are the rows' own ids):
//   figures  fig-boundary (Figure 2, every row), fig-surface (Figure 3, only with >= 2 rows),
//            fig-ttft-<row>, fig-throughput-<row> (Figure 1), fig-arrival-<row>,
//            fig-timeline-<row> (Figure 4)
//   points   <circle class="pt ..."> one per trial with metrics in fig-ttft / fig-throughput, one
//            per confirmation trial on each side in fig-boundary, one per row with an operating
//            point in fig-surface; <circle class="req ..."> one per measured request in
//            fig-arrival; <rect class="bar ..."> one per trial in fig-timeline
//   tables   tbl-overview, tbl-rows, tbl-maxpass, tbl-correctness, tbl-boundary-<row>,
//            tbl-locate-<row>, tbl-cost-<row>, tbl-arrival-<row>, tbl-tiers-<row> (rows with SLO
//            tiers: every tier side by side)
//   policy   rec-<row>: the recommended operating limit (capq/qualify/recommend.h), its rule,
//            the margin it keeps and the fields whose change must trigger requalification
//   flags    tier-order-<row>: a tier at least as strict as another admits a higher level
#pragma once

#include <string>

#include "capq/record/capacity_data.h"
#include "capq/status.h"

namespace capq {

std::string RenderReportHtml(const CapacityData& data);

// Renders and writes atomically.
Status WriteReport(const std::string& html_path, const CapacityData& data);

}  // namespace capq
