"""atheris harness for the store reader (fuzz/targets.py: READERS["store"]).

    python fuzz/fuzz_store.py [libFuzzer flags] WORK_CORPUS fuzz/corpus/store     (or: python fuzz/run.py --reader store)
"""

from harness import main

if __name__ == "__main__":
    main("store")
