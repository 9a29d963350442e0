"""atheris harness for the status reader (fuzz/targets.py: READERS["status"]).

    python fuzz/fuzz_status.py [libFuzzer flags] WORK_CORPUS fuzz/corpus/status     (or: python fuzz/run.py --reader status)
"""

from harness import main

if __name__ == "__main__":
    main("status")
