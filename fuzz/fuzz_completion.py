"""atheris harness for the completion reader (fuzz/targets.py: READERS["completion"]).

    python fuzz/fuzz_completion.py [libFuzzer flags] WORK_CORPUS fuzz/corpus/completion     (or: python fuzz/run.py --reader completion)
"""

from harness import main

if __name__ == "__main__":
    main("completion")
