"""atheris harness for the rollouts reader (fuzz/targets.py: READERS["rollouts"]).

    python fuzz/fuzz_rollouts.py [libFuzzer flags] WORK_CORPUS fuzz/corpus/rollouts     (or: python fuzz/run.py --reader rollouts)
"""

from harness import main

if __name__ == "__main__":
    main("rollouts")
