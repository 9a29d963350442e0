"""atheris harness for the gateway reader (fuzz/targets.py: READERS["gateway"]).

    python fuzz/fuzz_gateway.py [libFuzzer flags] WORK_CORPUS fuzz/corpus/gateway     (or: python fuzz/run.py --reader gateway)
"""

from harness import main

if __name__ == "__main__":
    main("gateway")
