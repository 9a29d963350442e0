"""atheris harness for the attestation_page reader (fuzz/targets.py: READERS["attestation_page"]).

    python fuzz/fuzz_attestation_page.py [libFuzzer flags] WORK_CORPUS fuzz/corpus/attestation_page     (or: python fuzz/run.py --reader attestation_page)
"""

from harness import main

if __name__ == "__main__":
    main("attestation_page")
