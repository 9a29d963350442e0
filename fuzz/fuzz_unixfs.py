"""atheris harness for the unixfs reader (fuzz/targets.py: READERS["unixfs"]).

    python fuzz/fuzz_unixfs.py [libFuzzer flags] WORK_CORPUS fuzz/corpus/unixfs     (or: python fuzz/run.py --reader unixfs)
"""

from harness import main

if __name__ == "__main__":
    main("unixfs")
