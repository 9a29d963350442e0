"""atheris harness for the shardcast_http reader (fuzz/targets.py: READERS["shardcast_http"]).

    python fuzz/fuzz_shardcast_http.py [libFuzzer flags] WORK_CORPUS fuzz/corpus/shardcast_http     (or: python fuzz/run.py --reader shardcast_http)
"""

from harness import main

if __name__ == "__main__":
    main("shardcast_http")
