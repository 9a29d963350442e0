"""atheris harness for the difficulty reader (fuzz/targets.py: READERS["difficulty"]).

    python fuzz/fuzz_difficulty.py [libFuzzer flags] WORK_CORPUS fuzz/corpus/difficulty     (or: python fuzz/run.py --reader difficulty)
"""

from harness import main

if __name__ == "__main__":
    main("difficulty")
