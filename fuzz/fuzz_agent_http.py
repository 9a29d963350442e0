"""atheris harness for the agent_http reader (fuzz/targets.py: READERS["agent_http"]).

    python fuzz/fuzz_agent_http.py [libFuzzer flags] WORK_CORPUS fuzz/corpus/agent_http     (or: python fuzz/run.py --reader agent_http)
"""

from harness import main

if __name__ == "__main__":
    main("agent_http")
