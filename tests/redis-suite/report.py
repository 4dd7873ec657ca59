#!/usr/bin/env python3
"""Compares the Redis test-suite logs of two targets (run.sh writes them).

Reads $OUT/logs/{redis,deltagrid}/<unit>.log (runtest output), $OUT/runs.tsv and
$OUT/events.tsv; writes $OUT/report.md, $OUT/results.tsv (one row per test the
suite reported on either target), $OUT/summary.tsv and $OUT/results.json.
Prints the table. Exit status: 0 when both runs ran and deltagrid passes at
least --min-percent of the tests Redis passes, 1 otherwise.

A test is identified by its unit, its name and its occurrence among the tests
of that name in the unit (a few names repeat). Tests deltagrid never ran (its
unit hung, an error outside any test aborted a start_server block, the test
client died) count as failed, with the reason.
"""

import argparse
import json
import os
import re
import sys
from collections import OrderedDict

ANSI = re.compile(r"\x1b\[[0-9;]*m")
STATUS = re.compile(r"^\[(ok|err|skip|ignore|exception|TIMEOUT)\]: ?(.*)$")
DONE = re.compile(r"^\[\d+/\d+ done\]: ")
IN_PROGRESS = re.compile(r"=> \(IN PROGRESS\) (.*)$")
TEST_ERR = re.compile(r"^(.*) in tests/(unit/.*)\.tcl$")
OK_MS = re.compile(r" \(\d+ ms\)$")


def unit_file(unit):
    return unit[len("unit/"):].replace("/", "_") if unit.startswith("unit/") else unit.replace("/", "_")


def first_error_line(chopped, details):
    """The suite (with --durable) reports a Tcl error as the message with its
    first 10 characters cut, followed by $::errorInfo whose first line is the
    whole message: prefer that line."""
    if details and len(details[0]) >= 10 and details[0][10:] == chopped:
        return details[0]
    return chopped


def parse_log(path):
    """Returns dict(events=[...], ended=bool, started=bool, timeout_test=str|None)."""
    res = {"events": [], "ended": False, "started": False, "exists": os.path.exists(path)}
    if not res["exists"]:
        return res
    with open(path, encoding="utf-8", errors="replace") as f:
        lines = [ANSI.sub("", l.rstrip("\n")) for l in f]
    cur = None  # the event collecting continuation lines

    def close():
        nonlocal cur
        if cur is None:
            return
        kind = cur["kind"]
        rest = cur["rest"]
        det = cur["details"]
        if kind == "ok":
            res["events"].append({"type": "test", "status": "ok", "name": OK_MS.sub("", rest)})
        elif kind == "err":
            m = TEST_ERR.match(rest)
            if m:
                msg = first_error_line(det[0] if det else "", det[1:])
                res["events"].append({"type": "test", "status": "err", "name": m.group(1),
                                      "error": msg, "details": "\n".join(det)[:4000]})
            else:
                # an error inside a start_server block but outside any test:
                # --durable reports it and the rest of the block is not run
                msg = first_error_line(rest, det)
                res["events"].append({"type": "abort", "kind": "block",
                                      "error": "error outside any test aborted its start_server block: " + msg,
                                      "details": "\n".join([rest] + det)[:4000]})
        elif kind == "exception":
            msg = rest
            res["events"].append({"type": "abort", "kind": "exception",
                                  "error": "test client died: " + msg,
                                  "details": "\n".join([rest] + det)[:4000]})
        elif kind == "TIMEOUT":
            hung = None
            for d in det:
                m = IN_PROGRESS.search(d)
                if m:
                    hung = m.group(1)
            if hung:
                res["events"].append({"type": "test", "status": "hung", "name": hung,
                                      "error": "hung: no progress within the suite's --timeout", "details": ""})
            res["events"].append({"type": "abort", "kind": "timeout",
                                  "error": "unit hung%s; the rest of it did not run" % (" in '%s'" % hung if hung else ""),
                                  "details": "\n".join(det)[:4000]})
        elif kind == "skip":
            res["events"].append({"type": "skip", "name": rest})
        elif kind == "ignore":
            res["events"].append({"type": "ignore", "name": rest})
        cur = None

    for line in lines:
        if line.strip() == "The End":
            close()
            res["ended"] = True
            break
        if line.startswith("Testing unit/") or line.startswith("[ready]"):
            close()
            res["started"] = True
            continue
        m = STATUS.match(line)
        if m:
            close()
            cur = {"kind": m.group(1), "rest": m.group(2), "details": []}
            continue
        if DONE.match(line):
            close()
            continue
        if cur is not None:
            cur["details"].append(line)
    close()
    if res["started"] and not res["ended"]:
        res["events"].append({"type": "abort", "kind": "killed",
                              "error": "runtest did not finish (killed by the unit time limit, or crashed); the rest of the unit did not run",
                              "details": ""})
    return res


def align(redis_tests, dg_events):
    """Maps each deltagrid test event to an index of redis_tests (same name,
    next unassigned occurrence at or after the current position, else any
    unassigned one). Returns (assign: dict redis_idx -> dg event, reasons:
    dict redis_idx -> why it did not run, extra: dg tests Redis never ran)."""
    assign = {}
    where = {}  # redis idx -> position in dg_events
    extra = []
    pos = -1
    for k, ev in enumerate(dg_events):
        if ev["type"] != "test":
            continue
        cands = [i for i, t in enumerate(redis_tests) if t["name"] == ev["name"] and i not in assign]
        after = [i for i in cands if i > pos]
        j = after[0] if after else (cands[0] if cands else None)
        if j is None:
            extra.append(ev)
            continue
        assign[j] = ev
        where[j] = k
        pos = max(pos, j)
    reasons = {}
    test_positions = sorted(where.items(), key=lambda kv: kv[1])  # (redis idx, event pos) in event order
    for i in range(len(redis_tests)):
        if i in assign:
            continue
        nxt = None
        prev_pos = -1
        for ridx, epos in test_positions:
            if ridx > i:
                nxt = epos
                break
            prev_pos = epos
        lo = prev_pos
        hi = nxt if nxt is not None else len(dg_events)
        # the aborts between the last test deltagrid reported before this one and the next
        aborts = [e for e in dg_events[lo + 1:hi] if e["type"] == "abort"]
        if not aborts and nxt is None:
            aborts = [e for e in dg_events if e["type"] == "abort"][-1:]
        if aborts:
            reasons[i] = "not run: " + aborts[-1]["error"]
        else:
            reasons[i] = "not run: the unit's own logic skipped it on deltagrid's replies"
    return assign, reasons, extra


def test_outcome(log, name):
    """(status, error) of test `name` in a runtest log of a run with --only."""
    p = parse_log(log)
    if not p["exists"]:
        return ("missing", "no log")
    for e in p["events"]:
        if e["type"] == "test" and e["name"] == name:
            return (e["status"], e.get("error", ""))
    aborts = [e["error"] for e in p["events"] if e["type"] == "abort"]
    return ("not-run", "not run: " + (aborts[-1] if aborts else "the unit's own logic skipped it"))


def load_isolation(out):
    """Reads isolation.tsv (run.sh with REDIS_SUITE_ISOLATE=1): per (unit, test)
    what happened when the test ran alone: dict(kind, error, text) with kind
    'passes' (failed in the full run only after an earlier test), 'fails'
    (fails alone while Redis passes alone: error is its own), or 'redis-too'
    (Redis fails it alone as well: it needs the state earlier tests leave)."""
    path = os.path.join(out, "isolation.tsv")
    res = {}
    if not os.path.exists(path):
        return res
    with open(path) as f:
        next(f, None)
        for line in f:
            p = line.rstrip("\n").split("\t")
            if len(p) < 3:
                continue
            n, unit, name = p[0], p[1], p[2]
            d = test_outcome(os.path.join(out, "logs", "isolate", n + ".deltagrid.log"), name)
            if d[0] == "ok":
                res[(unit, name)] = {"kind": "passes", "error": "",
                                     "text": "passes alone: it failed in the full run only after an earlier test"}
                continue
            r = test_outcome(os.path.join(out, "logs", "isolate", n + ".redis.log"), name)
            if r[0] != "ok":
                res[(unit, name)] = {"kind": "redis-too", "error": d[1],
                                     "text": "alone it fails on Redis too (needs earlier tests' state); deltagrid alone: " + d[1]}
            else:
                res[(unit, name)] = {"kind": "fails", "error": d[1], "text": "alone: [%s] %s" % (d[0], d[1])}
    return res


# Commands of features deltagrid does not have yet, named by feature.
FAMILIES = [
    ("lists", "LPUSH RPUSH LPOP RPOP LRANGE LLEN LINDEX LSET LINSERT LREM LTRIM LMOVE BLMOVE BLPOP BRPOP "
              "BRPOPLPUSH RPOPLPUSH LPOS LMPOP BLMPOP"),
    ("sets", "SADD SREM SMEMBERS SISMEMBER SCARD SRANDMEMBER SPOP SSCAN SINTER SUNION SDIFF SMOVE SINTERCARD "
             "SMISMEMBER SINTERSTORE SUNIONSTORE SDIFFSTORE"),
    ("sorted sets", "ZADD ZREM ZRANGE ZSCORE ZCARD ZSCAN ZINCRBY ZRANK ZREVRANGE ZRANGEBYSCORE ZPOPMIN ZPOPMAX "
                    "BZPOPMIN BZPOPMAX ZMPOP BZMPOP"),
    ("streams", "XADD XGROUP XREADGROUP XREAD XRANGE XLEN XACK XCLAIM XAUTOCLAIM XINFO XTRIM XDEL XSETID"),
    ("scripting", "EVAL EVALSHA EVAL_RO EVALSHA_RO SCRIPT FUNCTION FCALL FCALL_RO"),
    ("bit operations", "SETBIT GETBIT BITCOUNT BITPOS BITOP BITFIELD"),
    ("SORT", "SORT SORT_RO"),
]
FAMILY_OF = {c: f for f, cs in FAMILIES for c in cs.split()}

CAUSE_PATTERNS = [
    (re.compile(r"ERR unknown command '([^']*)'", re.I),
     lambda m: ("%s not implemented (%s unknown)" % (FAMILY_OF[m.group(1).upper()], m.group(1).upper()))
     if m.group(1).upper() in FAMILY_OF else "command %s missing" % m.group(1).upper()),
    (re.compile(r"ERR unknown subcommand '([^']*)'\. Try (\w+) HELP", re.I),
     lambda m: "%s %s missing" % (m.group(2).upper(), m.group(1).upper())),
    (re.compile(r"Unknown option or number of arguments for CONFIG SET - '([^']*)'"),
     lambda m: "CONFIG SET %s: unknown parameter" % m.group(1)),
    (re.compile(r"^ERR CONFIG SET failed \(possibly related to argument '([^']*)'\) - (.*)$"),
     lambda m: "CONFIG SET %s refused: %s" % (m.group(1), m.group(2))),
]


def classify(err):
    """A cause label for an error message (None: a cascade)."""
    err = err or ""
    if err.startswith("not run: error outside any test aborted its start_server block: "):
        return "before its first test, the block's setup failed: " + (
            classify(err.split(": ", 2)[2]) or err)
    if err.startswith("not run: "):
        return None
    for rx, label in CAUSE_PATTERNS:
        m = rx.search(err)
        if m:
            return label(m)
    if err.startswith("hung"):
        return "hangs: waits for a reply or message that never comes"
    if "I/O error reading reply" in err:
        return "connection closed by the server"
    msg = re.sub(r"\s*\(context: .*$", "", err.split("\n")[0]).strip()
    return "wrong reply: " + (msg[:160] + "..." if len(msg) > 160 else msg)


def attribute_causes(units, failures):
    """Sets x['cause'] (its own cause, None for a cascade) and x['root'] (the
    cause to fix for it to pass: its own, or for a cascade that of the nearest
    earlier failure in its unit that has a cause of its own)."""
    for unit in units:
        last_root = None
        last_name = None
        roots = {}
        for x in failures[unit]:
            iso = x.get("iso")
            if iso and iso["kind"] == "passes":
                own = None
            elif iso and iso["kind"] == "fails":
                own = classify(iso["error"])
            else:
                own = classify(x["error"])
            if own and own.startswith("hangs"):
                own = "'%s' hangs: it waits for a reply or message that never comes" % x["test"]
            x["cause"] = own
            hung = re.match(r"not run: unit hung in '(.*)'; ", x["error"] or "")
            if own is not None:
                x["root"] = own
                last_root, last_name = own, x["test"]
            elif hung and hung.group(1) in roots:
                # never ran because an earlier test hung: that test's cause
                x["root"], x["after"] = roots[hung.group(1)], hung.group(1)
            else:
                x["root"] = last_root or "fails only after an earlier test (no earlier failure with a cause of its own)"
                x["after"] = last_name
            roots.setdefault(x["test"], x["root"])


def md_escape(s, limit=400):
    s = s.replace("\n", " ").strip()
    if len(s) > limit:
        s = s[:limit] + "..."
    return s.replace("|", "\\|")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--units", required=True)
    ap.add_argument("--min-percent", type=float, default=85.0)
    ap.add_argument("--unit-min", default="",
                    help="per-unit gates: 'unit/type/set=90 unit/bitops=90 ...' (percent of what Redis passes)")
    ap.add_argument("--redis-version", default="")
    ap.add_argument("--deltagrid-bin", default="")
    ap.add_argument("--seconds", type=int, default=0)
    ap.add_argument("--list-failures", action="store_true",
                    help="print unit<TAB>test for each distinct test Redis passes and deltagrid fails, and exit")
    a = ap.parse_args()
    out = a.out
    units = a.units.split()

    runs = {}
    if os.path.exists(os.path.join(out, "runs.tsv")):
        with open(os.path.join(out, "runs.tsv")) as f:
            next(f, None)
            for line in f:
                p = line.rstrip("\n").split("\t")
                if len(p) >= 6:
                    runs[(p[0], p[1])] = {"rc": int(p[2]), "seconds": int(p[3]), "killed": p[4] == "1",
                                          "alive_after": p[5] == "1"}
    events_meta = []
    if os.path.exists(os.path.join(out, "events.tsv")):
        with open(os.path.join(out, "events.tsv")) as f:
            events_meta = [l.rstrip("\n").split("\t") for l in f if l.strip()]

    problems = []  # reasons the run does not count
    summary = []
    rows = []
    failures = OrderedDict()
    redis_failed = OrderedDict()
    aborts = OrderedDict()
    tot_r = tot_both = 0
    for unit in units:
        lr = parse_log(os.path.join(out, "logs", "redis", unit_file(unit) + ".log"))
        ld = parse_log(os.path.join(out, "logs", "deltagrid", unit_file(unit) + ".log"))
        if not lr["exists"] or not lr["started"]:
            problems.append("%s: the Redis run did not start" % unit)
        elif not lr["ended"] or any(e["type"] == "abort" for e in lr["events"]):
            problems.append("%s: the Redis run is incomplete (%s)" % (
                unit, "; ".join(e["error"] for e in lr["events"] if e["type"] == "abort") or "no end"))
        if not ld["exists"] or not ld["started"]:
            problems.append("%s: the deltagrid run did not start" % unit)
        redis_tests = [e for e in lr["events"] if e["type"] == "test"]
        assign, reasons, extra = align(redis_tests, ld["events"])
        occ = {}
        n_r = n_both = 0
        ufail = []
        for i, t in enumerate(redis_tests):
            occ[t["name"]] = occ.get(t["name"], 0) + 1
            d = assign.get(i)
            dstat = d["status"] if d else "not-run"
            derr = (d.get("error", "") if d else reasons.get(i, "not run"))
            if dstat == "ok":
                derr = ""
            rows.append({"unit": unit, "test": t["name"], "occurrence": occ[t["name"]],
                         "redis": t["status"], "deltagrid": dstat, "deltagrid_error": derr,
                         "deltagrid_details": d.get("details", "") if d else "",
                         "redis_error": t.get("error", "")})
            if t["status"] == "ok":
                n_r += 1
                if dstat == "ok":
                    n_both += 1
                else:
                    ufail.append({"test": t["name"], "status": dstat, "error": derr})
            else:
                redis_failed.setdefault(unit, []).append({"test": t["name"], "error": t.get("error", "")})
        for e in extra:
            rows.append({"unit": unit, "test": e["name"], "occurrence": 1, "redis": "absent",
                         "deltagrid": e["status"], "deltagrid_error": e.get("error", ""),
                         "deltagrid_details": e.get("details", ""), "redis_error": ""})
        failures[unit] = ufail
        aborts[unit] = [e["error"] for e in ld["events"] if e["type"] == "abort"]
        pct = 100.0 * n_both / n_r if n_r else 0.0
        rd = runs.get(("redis", unit), {})
        dd = runs.get(("deltagrid", unit), {})
        summary.append({"unit": unit, "redis_passed": n_r, "deltagrid_passed": n_both, "percent": round(pct, 1),
                        "redis_seconds": rd.get("seconds"), "deltagrid_seconds": dd.get("seconds"),
                        "deltagrid_hung": any(e.get("kind") == "timeout" for e in ld["events"] if e["type"] == "abort"),
                        "deltagrid_alive_after": dd.get("alive_after")})
        tot_r += n_r
        tot_both += n_both
    if a.list_failures:
        seen = set()
        for unit in units:
            for x in failures[unit]:
                if (unit, x["test"]) not in seen and "\t" not in x["test"] and "\n" not in x["test"]:
                    seen.add((unit, x["test"]))
                    print("%s\t%s" % (unit, x["test"]))
        return 0
    isolation = load_isolation(out)
    for unit in units:
        for x in failures[unit]:
            if (unit, x["test"]) in isolation:
                x["iso"] = isolation[(unit, x["test"])]
                x["alone"] = x["iso"]["text"]
    attribute_causes(units, failures)
    by_key = {(unit, x["test"]): x for unit in units for x in failures[unit]}
    for r in rows:
        x = by_key.get((r["unit"], r["test"]))
        if x and r["redis"] == "ok" and r["deltagrid"] != "ok":
            r["alone"] = x.get("alone", "")
            r["cause"] = x["cause"] or ""
            r["root_cause"] = x["root"]
    if tot_r == 0:
        problems.append("Redis passed no test at all")
    total_pct = 100.0 * tot_both / tot_r if tot_r else 0.0
    unit_gates = []  # (unit, minimum, percent or None, ok)
    for spec in a.unit_min.split():
        unit, _, minimum = spec.partition("=")
        got = next((x["percent"] for x in summary if x["unit"] == unit), None)
        unit_gates.append((unit, float(minimum), got, got is not None and got >= float(minimum)))
    gate_ok = not problems and total_pct >= a.min_percent and all(g[3] for g in unit_gates)

    # ---- outputs
    with open(os.path.join(out, "summary.tsv"), "w") as f:
        f.write("unit\tredis_passed\tdeltagrid_passed\tpercent\tredis_seconds\tdeltagrid_seconds\n")
        for s in summary:
            f.write("%s\t%d\t%d\t%.1f\t%s\t%s\n" % (s["unit"], s["redis_passed"], s["deltagrid_passed"], s["percent"],
                                                    s["redis_seconds"], s["deltagrid_seconds"]))
        f.write("TOTAL\t%d\t%d\t%.1f\t\t\n" % (tot_r, tot_both, total_pct))
    with open(os.path.join(out, "results.tsv"), "w") as f:
        f.write("unit\ttest\toccurrence\tredis\tdeltagrid\tdeltagrid_error\talone\troot_cause\n")
        for r in rows:
            f.write("\t".join([r["unit"], r["test"].replace("\t", " "), str(r["occurrence"]), r["redis"],
                               r["deltagrid"], r["deltagrid_error"].replace("\t", " ").replace("\n", " "),
                               r.get("alone", ""), r.get("root_cause", "")]) + "\n")
    result = {"redis_version": a.redis_version, "deltagrid_bin": a.deltagrid_bin, "seconds": a.seconds,
              "min_percent": a.min_percent, "total": {"redis_passed": tot_r, "deltagrid_passed": tot_both,
                                                      "percent": round(total_pct, 1)},
              "gate_passed": gate_ok, "problems": problems, "units": summary,
              "deltagrid_aborts": aborts, "meta": events_meta, "tests": rows}
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump(result, f, indent=1)

    table = ["| unit | Redis passes | deltagrid passes of those | % |", "|---|---:|---:|---:|"]
    for s in summary:
        table.append("| %s | %d | %d | %.1f |" % (s["unit"], s["redis_passed"], s["deltagrid_passed"], s["percent"]))
    table.append("| **total** | **%d** | **%d** | **%.1f** |" % (tot_r, tot_both, total_pct))

    md = ["# Redis %s test suite: deltagrid vs Redis" % (a.redis_version.split()[2] if a.redis_version.count(" ") >= 2 else ""),
          "",
          "- Redis: `%s`" % a.redis_version,
          "- deltagrid: `%s`" % a.deltagrid_bin,
          "- run time: %d s" % a.seconds,
          "- gate: deltagrid must pass >= %g%% of the tests Redis passes: %s (%.1f%%)" % (
              a.min_percent, "PASSED" if gate_ok else "FAILED", total_pct)]
    for m in events_meta:
        if m[0] == "function_flush":
            md.append("- `FUNCTION FLUSH` sent to %s before the run answered `%s`%s" % (
                m[1], m[2] if len(m) > 2 else "", " (the suite copy wraps the harness's call in catch)"
                if len(m) > 2 and m[2].startswith("-") else ""))
        elif m[0] == "restart":
            md.append("- %s was not running before %s and was started again" % (m[1], m[2]))
    for p in problems:
        md.append("- PROBLEM: %s" % p)
    md += ["", "## Results", ""] + table + [""]
    for s in summary:
        if s["deltagrid_alive_after"] is False:
            md.append("- deltagrid was not running after %s" % s["unit"])
    md += ["## Tests Redis passes and deltagrid fails", ""]
    for unit in units:
        if not failures[unit]:
            continue
        md.append("### %s (%d)" % (unit, len(failures[unit])))
        md.append("")
        for x in failures[unit]:
            md.append("- %s [%s]: %s%s" % (md_escape(x["test"], 200), x["status"], md_escape(x["error"]),
                                            (" -- " + md_escape(x["alone"])) if x.get("alone") else ""))
        md.append("")
    ranking = OrderedDict()
    for unit in units:
        for x in failures[unit]:
            ranking.setdefault(x["root"], []).append((unit, x))
    if ranking:
        md += ["## Failures by cause, most tests first (automatic grouping)", "",
               "A cause is read from the error (the one the test gives alone, when run with "
               "REDIS_SUITE_ISOLATE=1); a test that fails only after an earlier failure "
               "(\"cascade\") is counted under that earlier failure's cause. A test may need "
               "more than one fix: this lists the first one in its way.", ""]
        for cause, lst in sorted(ranking.items(), key=lambda kv: (-len(kv[1]), kv[0])):
            casc = sum(1 for _, x in lst if x["cause"] is None)
            md.append("- **%d** %s%s" % (len(lst), md_escape(cause, 300),
                                         " (%d of them cascades)" % casc if casc else ""))
            for unit, x in lst:
                md.append("  - %s: %s%s" % (unit, md_escape(x["test"], 200),
                                            " (after '%s')" % md_escape(x["after"], 120) if x.get("after") else ""))
        md.append("")
    if any(aborts.values()):
        md += ["## Where deltagrid's run of a unit stopped early", ""]
        for unit in units:
            for e in aborts[unit]:
                md.append("- %s: %s" % (unit, md_escape(e)))
        md.append("")
    if redis_failed:
        md += ["## Tests Redis itself fails here (not counted)", ""]
        for unit, lst in redis_failed.items():
            for x in lst:
                md.append("- %s: %s: %s" % (unit, md_escape(x["test"], 200), md_escape(x["error"])))
        md.append("")
    with open(os.path.join(out, "report.md"), "w") as f:
        f.write("\n".join(md) + "\n")

    print()
    print("\n".join(table))
    print()
    for p in problems:
        print("PROBLEM: " + p)
    for unit, minimum, got, ok in unit_gates:
        print("gate: %s: %s of what Redis passes, minimum %g%%: %s" % (
            unit, "not run" if got is None else "%.1f%%" % got, minimum, "PASSED" if ok else "FAILED"))
    print("gate: deltagrid passes %.1f%% of what Redis passes (%d/%d), minimum %g%%: %s" % (
        total_pct, tot_both, tot_r, a.min_percent, "PASSED" if gate_ok else "FAILED"))
    return 0 if gate_ok else 1


if __name__ == "__main__":
    sys.exit(main())
