"""atheris harness for the attestation-root leaves-file reader (fuzz/targets.py: READERS["attestation_root"]).

    python fuzz/fuzz_attestation_root.py [libFuzzer flags] WORK_CORPUS fuzz/corpus/attestation_root     (or: python fuzz/run.py --reader attestation_root)
"""

from harness import main

if __name__ == "__main__":
    main("attestation_root")
