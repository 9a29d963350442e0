"""atheris harness for the cid reader (fuzz/targets.py: READERS["cid"]).

    python fuzz/fuzz_cid.py [libFuzzer flags] WORK_CORPUS fuzz/corpus/cid     (or: python fuzz/run.py --reader cid)
"""

from harness import main

if __name__ == "__main__":
    main("cid")
