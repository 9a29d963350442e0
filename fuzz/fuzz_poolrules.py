"""atheris harness for the poolrules reader (fuzz/targets.py: READERS["poolrules"]).

    python fuzz/fuzz_poolrules.py [libFuzzer flags] WORK_CORPUS fuzz/corpus/poolrules     (or: python fuzz/run.py --reader poolrules)
"""

from harness import main

if __name__ == "__main__":
    main("poolrules")
