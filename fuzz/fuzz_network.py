"""atheris harness for the network reader (fuzz/targets.py: READERS["network"]).

    python fuzz/fuzz_network.py [libFuzzer flags] WORK_CORPUS fuzz/corpus/network     (or: python fuzz/run.py --reader network)
"""

from harness import main

if __name__ == "__main__":
    main("network")
