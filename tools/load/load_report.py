#!/usr/bin/env python3
"""Reads the Locust CSV statistics of tools/load/check.sh's app runs, prints them and decides the check.

  load_report.py WORK APP_SECONDS     (WORK holds app_*.csv, ec_*.csv, rsa_*.csv and bad_*.csv)

Exit 1 with the reasons when: any run but `bad` had a failure, completed no challenge or received no RReq; the run
against the replayer completed fewer than 5 app challenges per second, or lacks a frictionless or Erro flow; neither
distributed run completed a decoupled flow (it completes with its RReq, which a loaded sandbox sends late: RReqs still
on their way when a run ends are neither counted nor failed); or the bad-signature run completed a challenge or
failed for anything but acsSignedContent.
"""
import csv, os, sys


def read(work, name):
    stats = os.path.join(work, f"{name}_stats.csv")
    if not os.path.exists(stats):
        return None, []
    rows = {r["Name"]: r for r in csv.DictReader(open(stats))}
    failures = list(csv.DictReader(open(os.path.join(work, f"{name}_failures.csv"))))
    return rows, failures


def ms(text):
    """A Locust time column as whole milliseconds (a single sample's median is written unrounded)."""
    try:
        return f"{float(text):.0f}"
    except ValueError:
        return text


def count(rows, name, column="Request Count"):
    r = rows.get(name)
    return int(r[column]) if r else 0


def main(work, seconds):
    problems = []
    print(f"  {'':24}{'count':>8}{'failed':>8}{'median ms':>11}{'p99 ms':>9}")
    runs = {"app": "replay --timing none of demo-app, 1 master + 1 worker, 10 users",
            "ec": "sandbox EC/ES256, 1 master + 1 worker, 10 users", "rsa": "sandbox RSA/PS256, 4 users",
            "bad": "sandbox --bad-signature, 2 users"}
    results = {}
    for name, title in runs.items():
        rows, failures = read(work, name)
        if rows is None:
            problems.append(f"{name}: Locust wrote no statistics (see its log)")
            continue
        results[name] = (rows, failures)
        print(f"  {title}")
        for row in ("AReq", "CReq", "RReq", "app challenge", "app frictionless", "app decoupled", "app erro"):
            r = rows.get(row)
            if r:
                print(f"    {row:22}{r['Request Count']:>8}{r['Failure Count']:>8}{ms(r['Median Response Time']):>11}{ms(r['99%']):>9}")
        for f in failures[:5]:
            print(f"    failure: {f['Name']}: {f['Error'][:160]} ({f['Occurrences']}x)")
        if name != "bad" and count(rows, "Aggregated", "Failure Count"):
            problems.append(f"{name}: {count(rows, 'Aggregated', 'Failure Count')} failures")
        if name != "bad" and count(rows, "app challenge") == 0:
            problems.append(f"{name}: no app challenge completed")
        if name != "bad" and count(rows, "RReq") == 0:
            problems.append(f"{name}: no RReq received")
    if "app" in results:
        rows, _ = results["app"]
        challenges = count(rows, "app challenge")
        flows = sum(count(rows, k) for k in ("app challenge", "app frictionless", "app decoupled", "app erro"))
        print(f"locust app channel against replay --timing none (1 master, 1 worker, 10 users, {seconds:g} s): {challenges} app challenges, "
              f"{challenges / seconds:.1f} challenge flows/s, {flows / seconds:.1f} flows/s of all kinds, "
              f"CReq median {rows['CReq']['Median Response Time'] if 'CReq' in rows else '-'} ms")
        if challenges < 5 * seconds:
            problems.append(f"app: {challenges} challenges in {seconds:g} s, fewer than 5 a second")
        if count(rows, "CReq") < 2 * challenges:
            problems.append("app: fewer than two CReqs per challenge")
        print(f"  RReqs received during the run: {count(rows, 'RReq')} (for {challenges} challenges and the decoupled flows)")
        for kind in ("app frictionless", "app erro"):
            if count(rows, kind) == 0:
                problems.append(f"app: no {kind} flow completed")
        # A decoupled flow completes with its RReq, which the loaded sandbox may not have sent before the run ends.
        if not any(count(results[n][0], "app decoupled") for n in ("app", "ec") if n in results):
            problems.append("app, ec: no app decoupled flow completed")
    if "bad" in results:
        rows, failures = results["bad"]
        if count(rows, "app challenge"):
            problems.append(f"bad: {count(rows, 'app challenge')} challenges completed although acsSignedContent does not verify")
        if not failures:
            problems.append("bad: no failure reported for the corrupted acsSignedContent")
        for f in failures:
            if "acsSignedContent" not in f["Error"]:
                problems.append(f"bad: a failure for another reason: {f['Error'][:200]}")
        if count(rows, "app frictionless") == 0:
            problems.append("bad: frictionless flows did not complete")
    for p in problems:
        print(f"FAIL {p}")
    return 1 if problems else 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    try:
        secs = float(sys.argv[2])
    except ValueError:
        sys.exit(f"APP_SECONDS {sys.argv[2]!r} is not a number")
    sys.exit(main(sys.argv[1], secs))
