#!/usr/bin/env python3
"""Writes seed_like/capacity-data.json: synthetic capacity data shaped like the seed's three B70
rows (short 2048/512, reference 8192/1024, heavy 16384/2048), used by the report tests and the
render check. Deterministic (fixed random seed). Numbers are illustrative, not measurements."""
import json, math, os, random

rng = random.Random(7)


def pct(values, p):
    v = sorted(values)
    r = (len(v) - 1) * p / 100.0
    lo = math.floor(r)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (r - lo)


def dist(values):
    return {"n": len(values), "min": min(values), "p50": pct(values, 50), "p90": pct(values, 90),
            "p95": pct(values, 95), "p99": pct(values, 99), "max": max(values),
            "mean": sum(values) / len(values)}


def trial(row, phase, c, k, p50_ms, tail_ms, move, t0, out_tokens, prompt):
    n = max(64, 4 * c) if phase != "baseline" else 10
    arrivals = []
    for i in range(n):
        if i < c and c > 1:
            # The opening burst: every request arrives at once and queues for prefill.
            arrivals.append(p50_ms + (tail_ms - p50_ms) * (i / max(1, c - 1)) * rng.uniform(0.9, 1.25))
        else:
            arrivals.append(p50_ms * rng.uniform(0.93, 1.08) + (tail_ms - p50_ms) * 0.5 * rng.random() ** 6)
    # Stretch the queueing part so that p95 lands on the requested tail.
    p95 = pct(arrivals, 95)
    if p95 > p50_ms:
        arrivals = [v if v <= p50_ms else p50_ms + (v - p50_ms) * (tail_ms - p50_ms) / (p95 - p50_ms)
                    for v in arrivals]
    ttft = dist(arrivals)
    steady = pct(arrivals[c:], 95) if len(arrivals) > c else float("nan")
    itl_p50 = 9.6 + 3.4 * c * rng.uniform(0.95, 1.05)
    itl = {"n": n, "min": itl_p50 * 0.7, "p50": itl_p50, "p90": itl_p50 * 1.3, "p95": itl_p50 * 1.4,
           "p99": itl_p50 * 1.55, "max": itl_p50 * 1.8, "mean": itl_p50 * 1.05}
    e2e_p50 = p50_ms + itl_p50 * out_tokens
    e2e = {"n": n, "min": e2e_p50 * 0.9, "p50": e2e_p50, "p90": e2e_p50 * 1.08, "p95": e2e_p50 * 1.12,
           "p99": e2e_p50 * 1.15, "max": e2e_p50 * 1.2, "mean": e2e_p50}
    duration = n * e2e_p50 / 1000.0 / c
    out_tok_s = n * out_tokens / duration
    below = row["slo"][0]["below_ms"]
    passed = ttft["p95"] < below
    wall = 2.0 + duration / 10.0
    return {
        "phase": phase, "concurrency": c, "trial": k, "seed": rng.randrange(1, 10**9), "move": move,
        "outcome": "pass" if passed else "slo_fail", "exit_code": 0 if passed else 1,
        "latency_pass": passed, "correctness_pass": True, "complete": True,
        "slo": [{"metric": "ttft", "percentile": 95, "below_ms": below, "measured_ms": ttft["p95"],
                 "passed": passed}],
        "reasons": [] if passed else ["p95 ttft %.1f ms is not below %d ms" % (ttft["p95"], below)],
        "failed_gates": [], "time_scale": 1, "percentile_method": "linear",
        "correctness_totals": {"streams": n, "completion_tokens": n * out_tokens,
                               "nonempty_chunks": n * out_tokens // 4, "utf8_bytes": n * out_tokens * 5,
                               "unique_output_hashes": n, "warmup_prompts": 8, "measured_prompts": n},
        "dir": "%s/%s/c%d-t%d" % (row["id"], phase, c, k),
        "command": "capq trial --row rows/b70/%s.yaml --concurrency %d --trial %d --seed S --out DIR" % (row["id"], c, k),
        "sha256sums": "", "started_utc": "2026-11-29T10:00:00.000Z", "start_offset_s": t0, "wall_s": wall,
        "latency": {"requests": n, "ttft_ms": ttft, "ttft_p95_steady_ms": steady, "itl_ms": itl, "e2e_ms": e2e,
                    "output_tok_s": out_tok_s, "request_per_s": n / duration, "duration_s": duration,
                    "prompt_tokens_min": prompt, "prompt_tokens_max": prompt + 3,
                    "ttft_ms_by_arrival": arrivals},
    }


def row_data(rid, title, isl, osl, cmax, probes, p50, tail_of_c):
    row = {"id": rid, "title": title, "family": "b70", "source_path": "rows/b70/%s.yaml" % rid,
           "identity": {"engine": "sglang", "image": "rahulunair/sglang-xpu@sha256:feb7b9130eff2fa26dfa09ab1a8b9a8423db013ad7d18f804f8b55a57cb2c175",
                        "model": "ulkaa/Qwen3.8-27B-AWQ-INT4", "model_revision": "2bf7f1646dc0875cff4404fdfef976cfb0ff2199",
                        "served_model_name": "Qwen3.8-27B", "hardware": "4 x Intel Arc Pro B70", "driver": "17012946",
                        "sim_profile": "", "time_scale": 1},
           "workload": {"input_tokens": isl, "output_tokens": osl},
           "slo": [{"metric": "ttft", "percentile": 95, "below_ms": 10000}], "percentile_method": "linear",
           "warmup": {"requests": 8, "concurrency": 1}, "measured": {"min_requests": 64, "per_concurrency": 4},
           "trials": {"count": 3, "quiet_period_s": 15}, "expected_cmax": cmax}
    trials, t = [], 0.0
    phases = []
    prompt = isl + 51

    def add(phase, c, k, move):
        nonlocal t
        tr = trial(row, phase, c, k, p50, tail_of_c(c) * rng.uniform(0.985, 1.015), move, t, osl, prompt)
        trials.append(tr)
        t += tr["wall_s"] + 15
        return tr

    start = t
    add("baseline", 1, 1, "baseline")
    phases.append({"name": "baseline", "trials": 1, "wall_s": t - start, "start_offset_s": start})
    start = t
    for c, move in probes:
        add("probe", c, 1, move)
    phases.append({"name": "locate", "trials": len(probes), "wall_s": t - start, "start_offset_s": start})
    start = t
    for k in (1, 2, 3):
        add("confirm", cmax, k, "")
        add("confirm", cmax + 1, k, "")
    phases.append({"name": "confirm", "trials": 6, "wall_s": t - start, "start_offset_s": start})
    lo = [x["latency"]["ttft_ms"]["p95"] / 1000 for x in trials if x["phase"] == "confirm" and x["concurrency"] == cmax]
    hi = [x["latency"]["ttft_ms"]["p95"] / 1000 for x in trials if x["phase"] == "confirm" and x["concurrency"] == cmax + 1]
    ok = all(v < 10 for v in lo) and all(v >= 10 for v in hi)
    assert ok, (rid, lo, hi)
    summary = "%s: Cmax = %d — C=%d p95 %s s pass, C=%d %s s fail" % (
        rid, cmax, cmax, "/".join("%.2f" % v for v in lo), cmax + 1, "/".join("%.2f" % v for v in hi))
    budget = math.ceil(math.log2(cmax)) + 2
    return {"row": row,
            "result": {"status": "proven", "cmax": cmax, "operating_point": cmax,
                       "message": "every C=%d trial passed and every C=%d trial failed" % (cmax, cmax + 1),
                       "failed_gate": "", "summary_line": summary},
            "locate": {"max_concurrency": 64, "probes": len(probes), "probe_budget": budget},
            "baseline": {"checked": True, "within": True, "ttft_p50_ms": p50, "expected_ttft_p50_ms": p50 * 1.05,
                         "itl_p50_ms": 9.6, "expected_itl_p50_ms": 9.03, "tolerance_pct": 15,
                         "message": "TTFT p50 within tolerance"},
            "phases": phases, "trials": trials, "started_utc": "2026-11-29T10:00:00.000Z",
            "finished_utc": "2026-11-29T11:00:00.000Z", "wall_s": t, "complete": True,
            "url": "http://127.0.0.1:30000"}


rows = [
    row_data("b70_qwen38_27b_2k512", "Short agent turn, 2K in / 512 out", 2048, 512, 11,
             [(2, "double"), (4, "double"), (8, "double"), (16, "double"), (12, "bisect"), (11, "interpolate")],
             560.0, lambda c: 10000 * (c / 11.45) ** 1.6),
    row_data("b70_qwen38_27b_8k1k", "Reference agent turn, 8K in / 1K out", 8192, 1024, 7,
             [(4, "extrapolate"), (8, "double"), (6, "interpolate"), (7, "interpolate")],
             2130.0, lambda c: 2130 + 1080 * (c - 1) ** 1.05 if c > 1 else 2300),
    row_data("b70_qwen38_27b_16k2k", "Heavy agent turn, 16K in / 2K out", 16384, 2048, 5,
             [(2, "double"), (4, "double"), (8, "double"), (6, "bisect"), (5, "bisect")],
             4300.0, lambda c: 4300 + 1180 * (c - 1) ** 1.1),
]
data = {"schema": "capq/capacity/v1", "generated_utc": "2026-11-29T11:00:00.000Z",
        "command": "capq qualify rows/b70/b70_qwen38_27b_2k512.yaml rows/b70/b70_qwen38_27b_8k1k.yaml rows/b70/b70_qwen38_27b_16k2k.yaml",
        "rows": rows}
here = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(here, "seed_like", "capacity-data.json"), "w") as f:
    json.dump(data, f, indent=1)
    f.write("\n")
