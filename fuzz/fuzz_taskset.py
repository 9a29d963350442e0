"""atheris harness for the taskset reader (fuzz/targets.py: READERS["taskset"]).

    python fuzz/fuzz_taskset.py [libFuzzer flags] WORK_CORPUS fuzz/corpus/taskset     (or: python fuzz/run.py --reader taskset)
"""

from harness import main

if __name__ == "__main__":
    main("taskset")
