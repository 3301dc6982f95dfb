"""The markdown tables of benchmarks/w4_multistep.py's JSON: one run (`markdown`), and two runs side by side
(`compare`: speed-ups of the second over the first)."""
from __future__ import annotations

from typing import Any

from w4_phases import PHASES

W4 = ("w4a", "w4b", "w4c")
SHORT = {"prefill": "prefill", "decode": "decode", "stop_strings": "stop", "sample_host": "sampler host",
         "env": "env+tools", "tokenize": "tokenize", "train": "train", "host": "host"}


def _num(value: Any, form: str = "{:,.0f}") -> str:
    return "-" if value is None else form.format(value)


def _pct(value: Any) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def _per_unit(measured: dict) -> str:
    if measured.get("s_per_iteration") is not None:
        return f"{measured['s_per_iteration']:.2f} s/iter"
    return _num(measured.get("s_per_1000_episodes"), "{:.1f} s/1k ep")


def markdown(results: dict) -> str:
    """One run: rates, memory, GPU busy and both phase splits of each W4 workload, and W1's line."""
    work = results.get("workloads", {})
    lines = [f"W4 multi-step benchmark, label {results.get('label')!r}, {results.get('device')}, "
             f"model {results.get('model')}, code {results.get('code_root')} ({results.get('git', {}).get('commit')})",
             "", "| workload | generated tok/s | context tok/s | time | peak GB | GPU busy (profiled) | "
                 "GPU busy (NVML, measured run) | chunks | note |", "|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for name in W4:
        r = work.get(name)
        if r is None:
            continue
        m = r.get("measured") or {}
        prof = r.get("profile") or {}
        note = r.get("error") or prof.get("error") or ""
        extra = m.get("projected_2000_problems_min")
        if extra is not None:
            note = (note + "; " if note else "") + f"2,000 problems: {extra:.1f} min projected"
        lines.append(f"| {name} | {_num(m.get('generated_tok_per_s'))} | {_num(m.get('context_tok_per_s'))} | "
                     f"{_per_unit(m) if m else '-'} | {_num(r.get('peak_mem_gb'), '{:.1f}')} | "
                     f"{_pct(prof.get('gpu_busy_share'))} | {_pct(m.get('nvml_gpu_busy'))} | {m.get('chunks', '-')} | "
                     f"{note} |")
    w1 = work.get("w1")
    if w1 is not None:
        lines += ["", "W1 (this toolkit's side): " + (w1["error"] if "error" in w1 else
                  f"{w1['completion_tok_per_s']:,.0f} completion tok/s, median {w1['median_step_s']:.2f} s/step, "
                  f"peak {_num(w1.get('peak_mem_gb'), '{:.1f}')} GB, NVML GPU busy {_pct(w1.get('nvml_gpu_busy'))}")]
    for title, key, source in (("profiled chunk (GPU-busy time by the phase that launched the kernel, idle time by "
                                "the host's phase)", "phases", "profile"),
                               ("host clock, whole measured run, no profiler (GPU waits land where the host waits)",
                                "phases_plain", "measured")):
        lines += ["", f"Share of wall time, {title}:", "",
                  "| workload | " + " | ".join(SHORT[p] for p in PHASES) + " |", "|---|" + "---:|" * len(PHASES)]
        for name in W4:
            split = ((work.get(name) or {}).get(source) or {}).get(key)
            if split:
                lines.append(f"| {name} | " + " | ".join(_pct(split.get(p)) for p in PHASES) + " |")
    return "\n".join(lines) + "\n"


def _ratio(new: Any, old: Any) -> str:
    return f"{new / old:.2f}x" if isinstance(new, (int, float)) and isinstance(old, (int, float)) and old else "-"


def compare(old: dict, new: dict) -> str:
    """Speed-ups of run `new` over run `old` (new / old for rates, old / new for times), side by side."""
    a, b = old.get("workloads", {}), new.get("workloads", {})
    lines = [f"{new.get('label')!r} against {old.get('label')!r} ({old.get('device')} / {new.get('device')})", "",
             "| workload | generated tok/s | speed-up | context tok/s | speed-up | time per unit | GPU busy | "
             "peak GB | quality |", "|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for name in W4:
        if name not in a or name not in b:
            continue
        ma, mb = a[name].get("measured") or {}, b[name].get("measured") or {}
        pa, pb = a[name].get("profile") or {}, b[name].get("profile") or {}
        unit = "s_per_iteration" if mb.get("s_per_iteration") is not None else "s_per_1000_episodes"
        qa, qb = a[name].get("quality") or {}, b[name].get("quality") or {}
        quality = ", ".join(f"{k} {_num(qa.get(k), '{:.3f}')} -> {_num(qb.get(k), '{:.3f}')}"
                            for k in list(qb)[:3] if isinstance(qb.get(k), (int, float)))
        lines.append(f"| {name} | {_num(ma.get('generated_tok_per_s'))} -> {_num(mb.get('generated_tok_per_s'))} | "
                     f"{_ratio(mb.get('generated_tok_per_s'), ma.get('generated_tok_per_s'))} | "
                     f"{_num(ma.get('context_tok_per_s'))} -> {_num(mb.get('context_tok_per_s'))} | "
                     f"{_ratio(mb.get('context_tok_per_s'), ma.get('context_tok_per_s'))} | "
                     f"{_ratio(ma.get(unit), mb.get(unit))} | {_pct(pa.get('gpu_busy_share'))} -> "
                     f"{_pct(pb.get('gpu_busy_share'))} | {_num(a[name].get('peak_mem_gb'), '{:.1f}')} -> "
                     f"{_num(b[name].get('peak_mem_gb'), '{:.1f}')} | {quality} |")
        if a[name].get("settings") != b[name].get("settings"):
            changed = sorted(k for k in set(a[name].get("settings") or {}) | set(b[name].get("settings") or {})
                             if (a[name].get("settings") or {}).get(k) != (b[name].get("settings") or {}).get(k))
            lines.append(f"| {name}: settings differ | {', '.join(changed)} | | | | | | | |")
    if "w1" in a and "w1" in b and "error" not in a["w1"] and "error" not in b["w1"]:
        ra, rb = a["w1"], b["w1"]
        lines += ["", f"W1: {ra['completion_tok_per_s']:,.0f} -> {rb['completion_tok_per_s']:,.0f} completion tok/s "
                      f"({_ratio(rb['completion_tok_per_s'], ra['completion_tok_per_s'])}), peak "
                      f"{_num(ra.get('peak_mem_gb'), '{:.1f}')} -> {_num(rb.get('peak_mem_gb'), '{:.1f}')} GB"]
    return "\n".join(lines) + "\n"
