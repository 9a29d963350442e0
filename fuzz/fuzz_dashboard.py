"""atheris harness for the dashboard reader (fuzz/targets.py: READERS["dashboard"]).

    python fuzz/fuzz_dashboard.py [libFuzzer flags] WORK_CORPUS fuzz/corpus/dashboard     (or: python fuzz/run.py --reader dashboard)
"""

from harness import main

if __name__ == "__main__":
    main("dashboard")
