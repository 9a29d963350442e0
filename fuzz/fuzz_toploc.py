"""atheris harness for the toploc reader (fuzz/targets.py: READERS["toploc"]).

    python fuzz/fuzz_toploc.py [libFuzzer flags] WORK_CORPUS fuzz/corpus/toploc     (or: python fuzz/run.py --reader toploc)
"""

from harness import main

if __name__ == "__main__":
    main("toploc")
