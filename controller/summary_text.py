"""The run summary and ``servoloop status`` as text for a person (``--json`` gives the dicts)."""

from __future__ import annotations

from servoloop.controller.servo_friction import print_friction

__all__ = ["causes_text", "print_summary", "print_faults", "print_status", "wire_gate_text"]


def causes_text(s: dict) -> str:
    """`` (compute 0, bus 3, wakeup 1)`` when ticks were missed, else ``""``."""
    c = s.get("missed_by_cause")
    if not c or not s.get("missed"):
        return ""
    return " (" + ", ".join(f"{k} {c[k]}" for k in ("compute", "bus", "wakeup")) + ")"


def print_summary(s: dict) -> None:
    """The text of the run summary (`servoloop run` without `--json`)."""
    j = s["jitter_us"]
    errs = ", ".join(f"{k} {v}" for k, v in sorted(s["bus_errors"].items())) or "none"
    print(f"{s['robot']}: {s['state']} after {s['ticks']} ticks at {s['rate_hz']:.1f} Hz "
          f"(controller {s['controller']}, stop: {s['stop_reason']})")
    print(f"  jitter p50 {j['p50']:.1f} us, p99 {j['p99']:.1f} us, max {j['max']:.1f} us; "
          f"missed {s['missed']}{causes_text(s)}; bus errors: {errs}"
          f"{'; stale reads ' + str(s['stale_reads']) if s.get('stale_reads') else ''}{wire_gate_text(s)}")
    if w := s.get("tick_work_us"):
        print(f"  tick work p50 {w['p50']:.1f} us, p99 {w['p99']:.1f} us, max {w['max']:.1f} us")
    comm = s.get("comm")
    if comm and comm.get("steps"):
        print(f"  comm: ended at {comm['level']}; {len(comm['steps'])} ladder steps, failed ticks "
              f"{comm['failed_ticks']}, errors per servo {comm['errors_per_servo']}")
    print_faults(s)
    print_friction(s)
    for w in s["warnings"]:
        print(f"  warning: {w}")
    for a in s.get("advice", ()):
        print(f"  advice: {a}")
    if s.get("telemetry"):
        print(f"  telemetry: {s['telemetry']}")


def print_faults(s: dict) -> None:
    """``FAULT [kind]: message`` lines of a summary or status (kinds absent in older daemons)."""
    details = s.get("fault_details") or [{"kind": None, "message": m} for m in s.get("faults", [])]
    for f in details:
        kind = f" [{f['kind']}]" if f.get("kind") else ""
        print(f"  FAULT{kind}: {f['message']}")


def wire_gate_text(s: dict) -> str:
    """``; wire gate: ...`` when a stale tick's goal write waited for owed replies or was skipped."""
    g = s.get("wire_gate") or {}
    if not (g.get("waits") or g.get("skipped")):
        return ""
    return (f"; wire gate: {g['waits']} writes waited ({g['wait_us']:.0f} us in all), "
            f"{g['skipped']} skipped")


def print_status(st: dict) -> None:
    """The text of ``servoloop status`` from the daemon's status dict."""
    j = st["jitter_us"]
    print(f"{st['robot']}: {st['state']}  t={st['t_s']:.2f} s  tick {st['tick']}  rate {st['rate_hz']:.1f} Hz")
    print(f"  jitter p50 {j['p50']} us  p99 {j['p99']} us  max {j['max']} us  missed {st['missed']}"
          f"{causes_text(st)}  bus errors {st['bus_errors'] or 'none'}")
    if w := st.get("tick_work_us"):
        print(f"  tick work p50 {w['p50']} us  p99 {w['p99']} us  max {w['max']} us")
    print(f"  controller: {st['controller']}")
    print_friction(st)
    if comm := st.get("comm"):
        print(f"  comm: {comm['level']}; failed ticks {comm['failed_ticks']}, window rate "
              f"{comm['window_rate']:.2%}, errors per servo {comm['errors_per_servo'] or 'none'}"
              + (f", disabled servos {comm['disabled']}" if comm.get("disabled") else ""))
        for step in comm.get("steps", [])[-5:]:
            print(f"    t={step['t_s']:.3f} s {step['level']}: {step['message']}")
    if est := st.get("estimate"):
        p, r = est["base_position_in_world"], est["base_rpy"]
        feet = " ".join(f"{k}={'down' if v else 'up'}" for k, v in est["contact"].items())
        print(f"  base estimate{'' if est['valid'] else ' (INVALID)'}: xyz {p[0]:.3f} {p[1]:.3f} {p[2]:.3f} m  "
              f"rpy {r[0]:.3f} {r[1]:.3f} {r[2]:.3f} rad  feet {feet}")
        s = est.get("at_run_start")
        if s:       # x, y count from power-up: a stand-up from lying moves the trunk there
            d = [a - b for a, b in zip(p, s["base_position_in_world"], strict=True)]
            print(f"  since the run began: xyz {d[0]:+.3f} {d[1]:+.3f} {d[2]:+.3f} m  "
                  f"yaw {r[2] - s['base_rpy'][2]:+.3f} rad")
    print_faults(st)
