"""atheris harness for the attestation reader (fuzz/targets.py: READERS["attestation"]).

    python fuzz/fuzz_attestation.py [libFuzzer flags] WORK_CORPUS fuzz/corpus/attestation     (or: python fuzz/run.py --reader attestation)
"""

from harness import main

if __name__ == "__main__":
    main("attestation")
